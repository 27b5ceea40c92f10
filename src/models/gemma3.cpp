// Gemma 3's blocks (include/iron/models/gemma3.hpp); decoder.cpp holds the rest.
#include "iron/models/gemma3.hpp"

#include <cmath>

#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;

Gemma3Attention::Gemma3Attention(const LlamaConfig& c)
    : LlamaAttention(c),
      q_norm(param("q_norm", {c.head_dim}, f32)),
      k_norm(param("k_norm", {c.head_dim}, f32)) {}

Gemma3Block::Gemma3Block(const LlamaConfig& c, const LlamaOptions& options)
    : DecoderBlock(c, options),
      attn_norm(param("attn_norm", {c.dim}, f32)),
      attn(child<Gemma3Attention>("attn", c)),
      post_attn_norm(param("post_attn_norm", {c.dim}, f32)),
      ffn_norm(param("ffn_norm", {c.dim}, f32)),
      ffn(child<LlamaFeedForward>("ffn", c)),
      post_ffn_norm(param("post_ffn_norm", {c.dim}, f32)) {}

Gemma3Model::Gemma3Model(const LlamaConfig& config, const LlamaOptions& options)
    : DecoderModel("gemma3", config, options) {
  layers = children<Gemma3Block>("layers", int(config_.layers), config_, options_);
  global_rope_table = weight("global_rope_table", rope_cos_sin_table(config_.rope_base));
  local_rope_table = weight("local_rope_table", rope_cos_sin_table(config_.rope_local_base));
  embed_scale = weight("embed_scale", Tensor::from(std::vector<float>(size_t(config_.dim), float(std::sqrt(double(config_.dim)))),
                                                   {config_.dim}));
}

Handle Gemma3Model::embedded(Handle x) { return x * Handle(embed_scale); }

Handle Gemma3Model::block(size_t layer, Handle x, const Rows& at, int64_t n) {
  Gemma3Block& b = *layers[layer];
  const LlamaConfig& c = config_;
  const double eps = c.rms_eps;
  const Precision p = options_.precision;
  const bool sliding = c.is_sliding(int64_t(layer));
  Handle table = rope_rows(sliding ? local_rope_table : global_rope_table, at, n);
  Handle h = F::rms_norm(x, c.dim, b.attn_norm, eps);
  const CacheRows cache = cache_rows(b, at, n);
  Handle q_lin = F::linear(h, b.attn.q, {}, p), k_lin = F::linear(h, b.attn.k, {}, p);
  Handle v = F::linear(h, b.attn.v, {}, p, {}, cache.v_into);
  // Each head normalised over its head_dim, then turned.
  Handle q = F::rope_cos_sin(F::rms_norm(heads(q_lin, c.heads, x, n), c.head_dim, b.attn.q_norm, eps), table,
                             c.rope_mode);
  Handle k = F::rope_cos_sin(F::rms_norm(heads(k_lin, c.kv_heads, x, n), c.head_dim, b.attn.k_norm, eps), table,
                             c.rope_mode, cache.k_into);
  std::optional<double> scale;
  if (c.attention_scale > 0) scale = c.attention_scale;
  Handle attended = attend(b, cache, q, k, heads(v, c.kv_heads, x, n), at, scale, sliding ? c.sliding_window : 0);
  Handle o = F::linear(attended.reshape({n, c.heads * c.head_dim}).bounded(0, *x.valid(0)), b.attn.o, {}, p);
  x = x + F::rms_norm(o, c.dim, b.post_attn_norm, eps);
  h = F::rms_norm(x, c.dim, b.ffn_norm, eps);
  Handle gate = F::linear(h, b.ffn.gate, {}, p), up = F::linear(h, b.ffn.up, {}, p);
  Handle ffn = F::linear(F::gelu(gate, "tanh") * up, b.ffn.down, {}, p);
  return x + F::rms_norm(ffn, c.dim, b.post_ffn_norm, eps);
}

}  // namespace iron::models
