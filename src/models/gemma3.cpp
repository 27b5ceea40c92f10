// Gemma 3's blocks (include/iron/models/gemma3.hpp), for the decoder (decoder.cpp holds the
// rest of it) and the encoder alike.
#include "iron/models/gemma3.hpp"

#include <cmath>

#include "iron/error.hpp"
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

Gemma3Block::Gemma3Block(const LlamaConfig& c)
    : attn_norm(param("attn_norm", {c.dim}, f32)),
      attn(child<Gemma3Attention>("attn", c)),
      post_attn_norm(param("post_attn_norm", {c.dim}, f32)),
      ffn_norm(param("ffn_norm", {c.dim}, f32)),
      ffn(child<LlamaFeedForward>("ffn", c)),
      post_ffn_norm(param("post_ffn_norm", {c.dim}, f32)) {}

Gemma3Block::Projected Gemma3Block::project(const LlamaConfig& c, const Handle& x, int64_t n, const Handle& table,
                                            Precision p, const Handle& k_into, const Handle& v_into) const {
  const double eps = c.rms_eps;
  // (n, count * head_dim) as heads, bounded per call as x is.
  const auto heads = [&](const Handle& y, int64_t count) {
    Handle h = y.reshape({n, count, c.head_dim});
    return x.valid(0) ? h.bounded(0, *x.valid(0)) : h;
  };
  Handle h = F::rms_norm(x, c.dim, attn_norm, eps);
  Handle q_lin = F::linear(h, attn.q, {}, p), k_lin = F::linear(h, attn.k, {}, p);
  Handle v = F::linear(h, attn.v, {}, p, {}, v_into);
  // Each head normalised over its head_dim, then turned.
  Handle q = F::rope_cos_sin(F::rms_norm(heads(q_lin, c.heads), c.head_dim, attn.q_norm, eps), table, c.rope_mode);
  Handle k = F::rope_cos_sin(F::rms_norm(heads(k_lin, c.kv_heads), c.head_dim, attn.k_norm, eps), table, c.rope_mode,
                             k_into);
  return {q, k, heads(v, c.kv_heads)};
}

Handle Gemma3Block::finish(const LlamaConfig& c, const Handle& x, int64_t n, const Handle& attended, Precision p) const {
  const double eps = c.rms_eps;
  Handle joined = attended.reshape({n, c.heads * c.head_dim});
  if (x.valid(0)) joined = joined.bounded(0, *x.valid(0));
  Handle y = x + F::rms_norm(F::linear(joined, attn.o, {}, p), c.dim, post_attn_norm, eps);
  Handle h = F::rms_norm(y, c.dim, ffn_norm, eps);
  Handle gate = F::linear(h, ffn.gate, {}, p), up = F::linear(h, ffn.up, {}, p);
  Handle f = F::linear(F::gelu_tanh_mul(gate, up), ffn.down, {}, p);
  return y + F::rms_norm(f, c.dim, post_ffn_norm, eps);
}

// ---- the decoder ------------------------------------------------------------------------------

namespace {
// Gemma scales its embedded rows by sqrt(dim): (dim,) of it.
Tensor embedding_scale(int64_t dim) {
  return Tensor::from(std::vector<float>(size_t(dim), float(std::sqrt(double(dim)))), {dim});
}
}  // namespace

Gemma3Model::Gemma3Model(const LlamaConfig& config, const LlamaOptions& options)
    : DecoderModel("gemma3", config, options) {
  layers = children<Gemma3Block>("layers", int(config_.layers), config_, options_);
  global_rope_table = weight("global_rope_table", rope_cos_sin_table(config_.rope_base));
  local_rope_table = weight("local_rope_table", rope_cos_sin_table(config_.rope_local_base));
  embed_scale = weight("embed_scale", embedding_scale(config_.dim));
}

Handle Gemma3Model::embedded(Handle x) { return x * Handle(embed_scale); }

Handle Gemma3Model::block(size_t layer, Handle x, const Rows& at, int64_t n) {
  Gemma3Block& b = *layers[layer];
  const LlamaConfig& c = config_;
  const bool sliding = c.is_sliding(int64_t(layer));
  const CacheRows cache = cache_rows(b, at, n);
  const Gemma3Block::Projected in = b.project(c, x, n, rope_rows(sliding ? local_rope_table : global_rope_table, at, n),
                                              options_.precision, cache.k_into, cache.v_into);
  std::optional<double> scale;
  if (c.attention_scale > 0) scale = c.attention_scale;
  Handle attended = attend(b, cache, in.q, in.k, in.v, at, scale, sliding ? c.sliding_window : 0);
  return b.finish(c, x, n, attended, options_.precision);
}

// ---- the encoder ------------------------------------------------------------------------------

int64_t encoder_window(const LlamaConfig& config) { return config.sliding_window / 2 + 1; }

Gemma3Encoder::Gemma3Encoder(const LlamaConfig& config, const SentenceConfig& sentence, bool normalize,
                             Precision precision)
    : EncoderGraph("gemma3_encoder", config.dim, sentence, normalize, precision), config_(config) {
  validate(config_);
  if (!config_.bidirectional)
    value_error("gemma3 encoder: the config does not ask for bidirectional attention (use_bidirectional_attention): "
                "a language model, not a sentence encoder");
  if (config_.architecture != "gemma3")
    value_error("gemma3 encoder: a " + config_.architecture + " config, not Gemma 3's");
  embed = param("embed", {config_.vocab, config_.dim}, keep_dtype);
  norm = param("norm", {config_.dim}, f32);
  layers = children<Gemma3Block>("layers", int(config_.layers), config_);
  global_rope_table = weight("global_rope_table", rope_cos_sin_table(config_.rope_base, config_.head_dim, config_.context));
  local_rope_table = weight("local_rope_table", rope_cos_sin_table(config_.rope_local_base, config_.head_dim, config_.context));
  embed_scale = weight("embed_scale", embedding_scale(config_.dim));
}

Gemma3Encoder::~Gemma3Encoder() = default;

Outputs Gemma3Encoder::body() {
  const LlamaConfig& c = config_;
  const auto [batch, S] = batch_shape();
  const int64_t rows = batch * S;
  // Each sentence's positions count from 0: the tables' first S rows, once per sentence, gathered
  // once a call for every layer.
  const std::vector<int64_t> positions = sentence_positions(batch, S);
  const Handle global = F::copy(Handle(global_rope_table).rows(positions));
  const Handle local = F::copy(Handle(local_rope_table).rows(positions));
  Handle x = F::copy(Handle(embed)[Handle(tokens).reshape({rows})], f32) * Handle(embed_scale);
  std::optional<double> scale;
  if (c.attention_scale > 0) scale = c.attention_scale;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Gemma3Block& b = *layers[i];
    const bool sliding = c.is_sliding(int64_t(i));
    const Gemma3Block::Projected in = b.project(c, x, rows, sliding ? local : global, precision_);
    Handle attended = F::segment_attention(in.q, in.k, in.v, lengths, S, scale, sliding ? encoder_window(c) : 0,
                                           precision_);
    x = b.finish(c, x, rows, attended, precision_);
  }
  return {sentence_vectors(F::rms_norm(x, c.dim, norm, c.rms_eps), batch, S)};
}

}  // namespace iron::models
