// The Llama family's blocks (include/iron/models/llama.hpp); decoder.cpp holds the rest.
#include "iron/models/llama.hpp"

#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;

namespace {
// Quantised weights stay as the checkpoint holds them; kernels read them in place.
constexpr DType kWeights = keep_dtype;
}  // namespace

LlamaAttention::LlamaAttention(const LlamaConfig& c)
    : q(param("q", {c.heads * c.head_dim, c.dim}, kWeights)),
      k(param("k", {c.kv_heads * c.head_dim, c.dim}, kWeights)),
      v(param("v", {c.kv_heads * c.head_dim, c.dim}, kWeights)),
      o(param("o", {c.dim, c.heads * c.head_dim}, kWeights)) {
  if (c.architecture == "qwen2") {
    q_bias = param("q_bias", {c.heads * c.head_dim}, f32);
    k_bias = param("k_bias", {c.kv_heads * c.head_dim}, f32);
    v_bias = param("v_bias", {c.kv_heads * c.head_dim}, f32);
  }
}

LlamaFeedForward::LlamaFeedForward(const LlamaConfig& c)
    : gate(param("gate", {c.ffn, c.dim}, kWeights)),
      up(param("up", {c.ffn, c.dim}, kWeights)),
      down(param("down", {c.dim, c.ffn}, kWeights)) {}

LlamaBlock::LlamaBlock(const LlamaConfig& c, const LlamaOptions& options)
    : DecoderBlock(c, options),
      attn_norm(param("attn_norm", {c.dim}, f32)),
      attn(child<LlamaAttention>("attn", c)),
      ffn_norm(param("ffn_norm", {c.dim}, f32)),
      ffn(child<LlamaFeedForward>("ffn", c)) {}

LlamaModel::LlamaModel(const LlamaConfig& config, const LlamaOptions& options)
    : DecoderModel(config.architecture == "qwen2" ? "qwen2" : "llama", config, options) {
  layers = children<LlamaBlock>("layers", int(config_.layers), config_, options_);
  rope_table = weight("rope_table", rope_cos_sin_table(config_.rope_base));
}

Handle LlamaModel::block(size_t layer, Handle x, const Rows& at, int64_t n) {
  LlamaBlock& b = *layers[layer];
  const LlamaConfig& c = config_;
  const double eps = c.rms_eps;
  const Precision p = options_.precision;
  Handle h = F::rms_norm(x, c.dim, b.attn_norm, eps);
  Handle table = rope_rows(rope_table, at, n);
  // This call's keys (turned) and values go into the cache at their positions, then every
  // query row attends to the cache up to its own position. The three projections first, then
  // both turns: each group reads only what the one before it wrote, so it runs as one phase
  // between two barriers.
  // Qwen2's biases the planner folds into the merged projection. A biased value cannot be written
  // into the cache by its matmul (functional::linear refuses the pair): attend() copies it there.
  auto bias = [](const std::optional<Param>& held) { return held ? Handle(*held) : Handle(); };
  CacheRows cache = cache_rows(b, at, n);
  if (b.attn.v_bias) cache.v_into = {};
  Handle q_lin = F::linear(h, b.attn.q, bias(b.attn.q_bias), p), k_lin = F::linear(h, b.attn.k, bias(b.attn.k_bias), p);
  Handle v = F::linear(h, b.attn.v, bias(b.attn.v_bias), p, {}, cache.v_into);
  Handle q = F::rope_cos_sin(heads(q_lin, c.heads, x, n), table, c.rope_mode);
  Handle k = F::rope_cos_sin(heads(k_lin, c.kv_heads, x, n), table, c.rope_mode, cache.k_into);
  Handle attended = attend(b, cache, q, k, heads(v, c.kv_heads, x, n), at);
  x = F::linear_residual(attended.reshape({n, c.heads * c.head_dim}).bounded(0, *x.valid(0)), b.attn.o, x, p);
  h = F::rms_norm(x, c.dim, b.ffn_norm, eps);
  Handle gate = F::linear(h, b.ffn.gate, {}, p), up = F::linear(h, b.ffn.up, {}, p);  // in this order
  Handle ffn = F::silu_mul(gate, up);
  return F::linear_residual(ffn, b.ffn.down, x, p);
}

}  // namespace iron::models
