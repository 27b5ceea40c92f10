#include "iron/models/llama.hpp"

#include <cmath>

#include "iron/error.hpp"
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
      o(param("o", {c.dim, c.heads * c.head_dim}, kWeights)) {}

LlamaFeedForward::LlamaFeedForward(const LlamaConfig& c)
    : gate(param("gate", {c.ffn, c.dim}, kWeights)),
      up(param("up", {c.ffn, c.dim}, kWeights)),
      down(param("down", {c.dim, c.ffn}, kWeights)) {}

LlamaBlock::LlamaBlock(const LlamaConfig& c, const LlamaOptions& options)
    : attn_norm(param("attn_norm", {c.dim}, f32)),
      attn(child<LlamaAttention>("attn", c)),
      ffn_norm(param("ffn_norm", {c.dim}, f32)),
      ffn(child<LlamaFeedForward>("ffn", c)),
      // One row past the context per prompt row, so a chunk's window never runs off the end.
      k_cache(state("k_cache", {options.context + options.chunk, c.kv_heads, c.head_dim}, options.k_cache_type())),
      v_cache(state("v_cache", {options.context + options.chunk, c.kv_heads, c.head_dim}, options.v_cache_type())) {}

// At medium the cache holds f16: its KL mean against the float64 reference is 1.05x the f32
// cache's on SmolLM2's golden positions, where bf16 costs 1.23x and q8_0 1.28x
// (SmolLM2.SmallerCachesAtMediumStayCloseToTheReference prints the figures).
const DType kMediumCacheDtype = f16;

DType LlamaOptions::k_cache_type() const {
  return k_cache_dtype.value_or(precision == Precision::medium ? kMediumCacheDtype : f32);
}
DType LlamaOptions::v_cache_type() const {
  return v_cache_dtype.value_or(precision == Precision::medium ? kMediumCacheDtype : f32);
}

void check_cache_type(DType t, int64_t head_dim, const char* which) {
  if (t != f32 && t != f16 && t != bf16 && t != DType::q8_0)
    value_error(std::string("llama: the ") + which + " cache type is f32, f16, bf16 or q8_0, not " +
                std::string(name(t)));
  if (t == DType::q8_0 && head_dim % 32)
    value_error(std::string("llama: a q8_0 ") + which + " cache holds blocks of 32 values; head_dim " +
                std::to_string(head_dim) + " is not a multiple of 32");
}

Tensor rope_table(const LlamaConfig& config, int64_t rows) {
  const int64_t d = config.head_dim, half = d / 2;
  std::vector<float> table(size_t(rows * d));
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(p) * std::pow(config.rope_base, -2.0 * double(i) / double(d));
      table[size_t(p * d + i)] = float(std::cos(angle));
      table[size_t(p * d + half + i)] = float(std::sin(angle));
    }
  return Tensor::from(table, {rows, d});
}

LlamaModel::LlamaModel(const LlamaConfig& config, const LlamaOptions& options)
    : Graph("llama"), config_(config), options_(options) {
  validate(config_);
  if (config_.rope_dims != config_.head_dim)
    value_error("llama: partial rotary embeddings (rope_dims " + std::to_string(config_.rope_dims) + " of head_dim " +
                std::to_string(config_.head_dim) + ") are not supported yet");
  check_cache_type(options_.k_cache_type(), config_.head_dim, "key");
  check_cache_type(options_.v_cache_type(), config_.head_dim, "value");
  if (options_.context < 1 || options_.chunk < 1)
    value_error("llama: context and chunk are positive, got " + std::to_string(options_.context) + " and " +
                std::to_string(options_.chunk));
  // Every row of the cache is a position, a per-call value: context + chunk stays below 2^30
  // (each checked first, so that the sum cannot overflow).
  if (options_.context >= kValueLimit || options_.chunk >= kValueLimit ||
      options_.context + options_.chunk > kValueLimit)
    value_error("llama: context + chunk rows are positions, at most 2^30 = " + std::to_string(kValueLimit) +
                "; got context " + std::to_string(options_.context) + " and chunk " + std::to_string(options_.chunk));
  tokens = input("tokens", /*optional=*/true);
  rows = scratchpad("rows", 1);
  position = carried("position");
  token = carried("token");
  step = carried("step");
  embed = param("embed", {config_.vocab, config_.dim}, kWeights);
  norm = param("norm", {config_.dim}, f32);
  output = config_.tied_embeddings ? tie("output", embed) : param("output", {config_.vocab, config_.dim}, kWeights);
  layers = children<LlamaBlock>("layers", int(config_.layers), config_, options_);
  const int64_t rows_held = options_.context + options_.chunk;
  rope_table = weight("rope_table", models::rope_table(config_, rows_held));
  generated = state("generated", {rows_held}, i32);
}

// One block over `n` rows (bounded per call) starting at absolute position `start`.
Handle LlamaModel::block(LlamaBlock& b, Handle x, const Affine& start, int64_t n) {
  const LlamaConfig& c = config_;
  const double eps = c.rms_eps;
  const Precision p = options_.precision;
  Handle h = F::rms_norm(x, c.dim, b.attn_norm, eps);
  Handle table = Handle(rope_table)[window(start, n)];
  auto heads = [&](const Handle& y, int64_t count) { return y.reshape({n, count, c.head_dim}).bounded(0, *x.valid(0)); };
  // This call's keys (turned) and values go straight into the cache at their positions, then
  // every query row attends to the cache up to its own position.
  Handle k_rows = Handle(b.k_cache)[window(start, n)], v_rows = Handle(b.v_cache)[window(start, n)];
  // An f32 cache is written in place by the step that makes its rows; any other type is rounded
  // into it by a copy.
  const bool k_direct = options_.k_cache_type() == f32, v_direct = options_.v_cache_type() == f32;
  // The three projections first, then both turns: each group reads only what the one before it
  // wrote, so it runs as one phase between two barriers.
  Handle q_lin = F::linear(h, b.attn.q, {}, p), k_lin = F::linear(h, b.attn.k, {}, p);
  Handle v = F::linear(h, b.attn.v, {}, p, {}, v_direct ? v_rows : Handle());
  Handle q = F::rope_cos_sin(heads(q_lin, c.heads), table, c.rope_mode);
  Handle k = F::rope_cos_sin(heads(k_lin, c.kv_heads), table, c.rope_mode, k_direct ? k_rows : Handle());
  if (!k_direct) k_rows.assign(k);
  if (!v_direct) v_rows.assign(heads(v, c.kv_heads));
  Handle attended = F::attention(q, b.k_cache, b.v_cache, start);
  x = F::linear_residual(attended.reshape({n, c.heads * c.head_dim}).bounded(0, *x.valid(0)), b.attn.o, x, p);
  h = F::rms_norm(x, c.dim, b.ffn_norm, eps);
  Handle gate = F::linear(h, b.ffn.gate, {}, p), up = F::linear(h, b.ffn.up, {}, p);  // in this order
  Handle ffn = F::silu_mul(gate, up);
  return F::linear_residual(ffn, b.ffn.down, x, p);
}

Outputs LlamaModel::body() {
  const LlamaConfig& c = config_;
  const bool prefill = bool(tokens);
  const int64_t n = prefill ? tokens.shape()[0] : 1;
  Affine count = prefill ? Affine(rows) : Affine(1);
  Handle x;
  if (prefill) {
    if (n > options_.chunk)
      value_error("llama: a prefill call takes at most chunk=" + std::to_string(options_.chunk) + " rows, not " +
                  std::to_string(n));
    x = F::copy(Handle(embed)[Handle(tokens)[upto(rows)]], f32);
  } else {
    x = F::copy(Handle(embed)[{at(token)}], f32).reshape({1, c.dim});
  }
  x = x.bounded(0, count);
  for (auto& layer : layers) x = block(*layer, x, position, n);

  // The last valid row's logits pick the next token; it goes where it will sit.
  Handle last = prefill ? F::copy(x[at(Affine(rows) - 1)]) : x.reshape({c.dim});
  Handle logits = F::linear(F::rms_norm(last, c.dim, norm, c.rms_eps), output, {}, options_.precision);
  const Sampling& sp = options_.sampling;
  Handle next = F::sample(logits, sp.temperature, sp.top_k, sp.top_p, sp.seed, step, position);
  std::vector<Handle> outs{logits, next};
  if (prefill && options_.all_logits) outs.push_back(F::linear(F::rms_norm(x, c.dim, norm, c.rms_eps), output));
  // A decode step leaves its token where the host finds it while later steps run: at the
  // position the token will take. A prefill call's token is its output.
  if (!prefill) Handle(generated)[window(Affine(position) + 1, 1)].assign(next);
  CarryValue next_position = prefill ? CarryValue(F::scalar({position, rows})) : CarryValue(Affine(position) + 1);
  return Outputs(outs, carry({{"token", next}, {"position", next_position}, {"step", Affine(step) + 1}}));
}

}  // namespace iron::models
