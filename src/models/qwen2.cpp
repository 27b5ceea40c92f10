// Qwen2's blocks (include/iron/models/qwen2.hpp); decoder.cpp holds the rest.
#include "iron/models/qwen2.hpp"

#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;

Qwen2Attention::Qwen2Attention(const LlamaConfig& c)
    : LlamaAttention(c),
      q_bias(param("q_bias", {c.heads * c.head_dim}, f32)),
      k_bias(param("k_bias", {c.kv_heads * c.head_dim}, f32)),
      v_bias(param("v_bias", {c.kv_heads * c.head_dim}, f32)) {}

Qwen2Block::Qwen2Block(const LlamaConfig& c, const LlamaOptions& options)
    : DecoderBlock(c, options),
      attn_norm(param("attn_norm", {c.dim}, f32)),
      attn(child<Qwen2Attention>("attn", c)),
      ffn_norm(param("ffn_norm", {c.dim}, f32)),
      ffn(child<LlamaFeedForward>("ffn", c)) {}

Qwen2Model::Qwen2Model(const LlamaConfig& config, const LlamaOptions& options)
    : DecoderModel("qwen2", config, options) {
  layers = children<Qwen2Block>("layers", int(config_.layers), config_, options_);
  rope_table = weight("rope_table", rope_cos_sin_table(config_.rope_base));
}

Handle Qwen2Model::block(size_t layer, Handle x, const Rows& at, int64_t n) {
  Qwen2Block& b = *layers[layer];
  const LlamaConfig& c = config_;
  const double eps = c.rms_eps;
  const Precision p = options_.precision;
  Handle h = F::rms_norm(x, c.dim, b.attn_norm, eps);
  Handle table = rope_rows(rope_table, at, n);
  // As Llama's block, each projection with its bias (which the planner folds into the matmul).
  // A biased value cannot be written into the cache by its matmul: attend() copies it there.
  const CacheRows cache = cache_rows(b, at, n);
  Handle q_lin = F::linear(h, b.attn.q, b.attn.q_bias, p), k_lin = F::linear(h, b.attn.k, b.attn.k_bias, p);
  Handle v = F::linear(h, b.attn.v, b.attn.v_bias, p);
  Handle q = F::rope_cos_sin(heads(q_lin, c.heads, x, n), table, c.rope_mode);
  Handle k = F::rope_cos_sin(heads(k_lin, c.kv_heads, x, n), table, c.rope_mode, cache.k_into);
  CacheRows copied = cache;
  copied.v_into = {};
  Handle attended = attend(b, copied, q, k, heads(v, c.kv_heads, x, n), at);
  x = F::linear_residual(attended.reshape({n, c.heads * c.head_dim}).bounded(0, *x.valid(0)), b.attn.o, x, p);
  h = F::rms_norm(x, c.dim, b.ffn_norm, eps);
  Handle gate = F::linear(h, b.ffn.gate, {}, p), up = F::linear(h, b.ffn.up, {}, p);  // in this order
  return F::linear_residual(F::silu_mul(gate, up), b.ffn.down, x, p);
}

}  // namespace iron::models
