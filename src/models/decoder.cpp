// The decoder skeleton every family shares (include/iron/models/decoder.hpp): options, the cache,
// the embedding, the classifier, sampling and the carried values.
#include "iron/models/decoder.hpp"

#include <cmath>

#include "graph/recording.hpp"
#include "iron/error.hpp"
#include "iron/functional.hpp"
#include "iron/models/gemma3.hpp"
#include "iron/models/llama.hpp"

namespace iron::models {

namespace F = functional;

// At medium the cache holds f16: its KL mean against the float64 reference is 1.15x the f32
// cache's on SmolLM2's golden positions, where bf16 costs 1.17x and q8_0 1.87x
// (SmolLM2.SmallerCachesAtMediumStayCloseToTheReference prints the figures); of the two 2-byte
// types f16 keeps more of each value.
const DType kMediumCacheDtype = f16;

DType LlamaOptions::k_cache_type() const {
  return k_cache_dtype.value_or(precision == Precision::medium ? kMediumCacheDtype : f32);
}
DType LlamaOptions::v_cache_type() const {
  return v_cache_dtype.value_or(precision == Precision::medium ? kMediumCacheDtype : f32);
}

void check_cache_type(DType t, int64_t head_dim, const char* which) {
  if (t != f32 && t != f16 && t != bf16 && t != DType::q8_0)
    value_error(std::string("the ") + which + " cache type is f32, f16, bf16 or q8_0, not " +
                std::string(name(t)));
  if (t == DType::q8_0 && head_dim % 32)
    value_error(std::string("a q8_0 ") + which + " cache holds blocks of 32 values; head_dim " +
                std::to_string(head_dim) + " is not a multiple of 32");
}

DecoderBlock::DecoderBlock(const LlamaConfig& c, const LlamaOptions& options)
    : k_cache(state("k_cache", {options.slots * (options.context + options.chunk), c.kv_heads, c.head_dim},
                    options.k_cache_type())),
      v_cache(state("v_cache", {options.slots * (options.context + options.chunk), c.kv_heads, c.head_dim},
                    options.v_cache_type())) {}

DecoderModel::DecoderModel(const std::string& name, const LlamaConfig& config, const LlamaOptions& options)
    : Graph(name), config_(config), options_(options) {
  validate(config_);
  if (config_.bidirectional)
    value_error(name + ": the model attends both ways (use_bidirectional_attention): a sentence encoder such as "
                       "EmbeddingGemma, not a language model; embed with it (iron embed, SentenceEncoder)");
  if (config_.rope_dims != config_.head_dim)
    value_error(name + ": partial rotary embeddings (rope_dims " + std::to_string(config_.rope_dims) +
                " of head_dim " + std::to_string(config_.head_dim) + ") are not supported yet");
  check_cache_type(options_.k_cache_type(), config_.head_dim, "key");
  check_cache_type(options_.v_cache_type(), config_.head_dim, "value");
  if (options_.context < 1 || options_.chunk < 1)
    value_error(name + ": context and chunk are positive, got " + std::to_string(options_.context) + " and " +
                std::to_string(options_.chunk));
  if (options_.slots < 1 || options_.slots > 1024)
    value_error(name + ": cache slots are 1 to 1024, got " + std::to_string(options_.slots));
  // Every row of the cache is a position, a per-call value: context + chunk stays below 2^30
  // (each checked first, so that the sum cannot overflow).
  if (options_.context >= kValueLimit || options_.chunk >= kValueLimit ||
      options_.context + options_.chunk > kValueLimit || options_.slots * (options_.context + options_.chunk) > kValueLimit)
    value_error(name + ": context + chunk rows are positions, at most 2^30 = " + std::to_string(kValueLimit) +
                "; got context " + std::to_string(options_.context) + " and chunk " + std::to_string(options_.chunk));
  tokens = input("tokens", /*optional=*/true);
  sampling = input("sampling", /*optional=*/true);
  positions = input("positions", /*optional=*/true);
  slots = input("slots", /*optional=*/true);
  pick = input("pick", /*optional=*/true);
  draws = input("draws", /*optional=*/true);
  rows = scratchpad("rows", 1);
  batch_rows = scratchpad("batch_rows");  // no default: a batched call says how many rows are its own
  position = carried("position");
  token = carried("token");
  step = carried("step");
  // Quantised weights stay as the checkpoint holds them; kernels read them in place.
  embed = param("embed", {config_.vocab, config_.dim}, keep_dtype);
  norm = param("norm", {config_.dim}, f32);
  output = config_.tied_embeddings ? tie("output", embed) : param("output", {config_.vocab, config_.dim}, keep_dtype);
  settings = state("settings", {1, F::kSampleSettingsWords}, i32);
}

Tensor rope_cos_sin_table(double base, int64_t d, int64_t held) {
  const int64_t half = d / 2;
  std::vector<float> table(size_t(held * d));
  for (int64_t p = 0; p < held; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(p) * std::pow(base, -2.0 * double(i) / double(d));
      table[size_t(p * d + i)] = float(std::cos(angle));
      table[size_t(p * d + half + i)] = float(std::sin(angle));
    }
  return Tensor::from(table, {held, d});
}

Handle DecoderModel::heads(const Handle& y, int64_t count, const Handle& x, int64_t n) const {
  return y.reshape({n, count, config_.head_dim}).bounded(0, *x.valid(0));
}

Handle DecoderModel::rope_rows(const Weight& table, const Rows& at, int64_t n) const {
  if (!at.batch()) return Handle(table)[window(at.start, n)];
  // A batch gathers each row's position (ids checked on the host against the table's rows), once
  // for every layer: as each layer's view it was two copies a layer (one for q's RoPE, one for
  // k's), SmolLM2's 8-row step 337 kernels where it is now 278 (its time within the noise).
  Handle& gathered = at.rope_gathered[&table];
  if (!gathered.defined()) gathered = F::copy(Handle(table)[at.positions]);
  return gathered;
}

DecoderModel::CacheRows DecoderModel::cache_rows(DecoderBlock& b, const Rows& at, int64_t n) const {
  CacheRows r;
  if (at.batch()) {
    // Each row's keys and values are scattered to its own slot's row by a copy (which rounds
    // them to the cache's type as it would a window's).
    r.k = Handle(b.k_cache)[at.cache_rows];
    r.v = Handle(b.v_cache)[at.cache_rows];
    return r;
  }
  r.k = Handle(b.k_cache)[window(at.start, n)];
  r.v = Handle(b.v_cache)[window(at.start, n)];
  // An f32 cache is written in place by the step that makes its rows; any other type is
  // rounded into it by a copy (attend()).
  if (options_.k_cache_type() == f32) r.k_into = r.k;
  if (options_.v_cache_type() == f32) r.v_into = r.v;
  return r;
}

Handle DecoderModel::attend(DecoderBlock& b, const CacheRows& rows_of, const Handle& q, const Handle& k,
                            const Handle& v, const Rows& at, std::optional<double> scale, int64_t window) {
  if (!rows_of.k_into) rows_of.k.assign(k);
  if (!rows_of.v_into) rows_of.v.assign(v);
  if (at.batch())
    return F::slot_attention(q, b.k_cache, b.v_cache, at.positions, at.slots, rows_held(), scale, window,
                             options_.precision);
  // One sequence (a prefill or decode version) is slot 0's: its positions are below a slot's
  // rows, so it reads no other slot's keys.
  return F::attention(q, b.k_cache, b.v_cache, at.start, scale, window, options_.precision);
}

Outputs DecoderModel::batch_body() {
  const LlamaConfig& c = config_;
  const int64_t n = tokens.shape()[0];
  auto check = [&](const Input& in, const char* what) {
    if (!in || in.shape() != Shape{n} || in->dtype() != i32)
      value_error(name() + ": a batched decode of " + std::to_string(n) + " rows takes " + what + " (" +
                  std::to_string(n) + ",) i32" + (in ? ", not " + Handle(in).str() : std::string(", none given")));
  };
  check(tokens, "tokens");
  check(positions, "positions");
  check(slots, "slots");
  if (!pick || pick.shape().size() != 1 || pick->dtype() != i32)
    value_error(name() + ": a batched call takes pick (P,) i32, the rows whose logits and tokens it returns");
  const int64_t picked = pick.shape()[0];
  if (!draws || draws.shape() != Shape{picked, 2} || draws->dtype() != i32)
    value_error(name() + ": a batched call picking " + std::to_string(picked) + " rows takes draws (" +
                std::to_string(picked) + ", 2) i32: each draw's counter and position");
  if (!sampling || sampling.shape() != Shape{picked, F::kSampleSettingsWords} || sampling->dtype() != i32)
    value_error(name() + ": a batched call picking " + std::to_string(picked) + " rows takes sampling (" +
                std::to_string(picked) + ", " + std::to_string(F::kSampleSettingsWords) +
                ") i32 (a row of functional::sample_settings each)");
  // The model's own limits first, so their errors name the context and the slots.
  Recorder& r = Recorder::require("a batched decode");
  r.limit_ids(positions, options_.context, "a position in a context of " + std::to_string(options_.context));
  r.limit_ids(slots, options_.slots, "a cache slot of " + std::to_string(options_.slots));
  Rows place;
  place.positions = positions;
  place.slots = slots;
  place.cache_rows = F::slot_rows(slots, positions, options_.slots, rows_held());
  // The call's first `batch_rows` rows are its own; a version of B rows serves any call of up
  // to B (BatchDecoder rounds a prefill call's rows up to a power of two), the rows past them
  // neither computed nor written to the cache. The value has no default: a call without it is
  // an error, not one row.
  Handle x = F::copy(Handle(embed)[Handle(tokens)[upto(batch_rows)]], f32);
  x = embedded(x.bounded(0, Affine(batch_rows)));
  for (size_t i = 0; i < layer_count(); ++i) x = block(i, x, place, n);
  // Only the picked rows reach the classifier (a prompt chunk's last, or every decode row): a
  // gather whose ids the host checks against the call's rows.
  Handle last = F::copy(x[Handle(pick)]);
  Handle logits = F::linear(F::rms_norm(last, c.dim, norm, c.rms_eps), output, {}, options_.precision);
  const Handle keys = Handle(draws);
  return Outputs({logits, F::sample_rows(logits, sampling, F::copy(keys[{all, 0}]), F::copy(keys[{all, 1}]))});
}

Outputs DecoderModel::body() {
  if (positions || slots || draws || pick) return batch_body();
  const LlamaConfig& c = config_;
  const bool prefill = bool(tokens);
  const int64_t n = prefill ? tokens.shape()[0] : 1;
  Affine count = prefill ? Affine(rows) : Affine(1);
  Handle x;
  if (prefill) {
    if (n > options_.chunk)
      value_error(name() + ": a prefill call takes at most chunk=" + std::to_string(options_.chunk) + " rows, not " +
                  std::to_string(n));
    x = F::copy(Handle(embed)[Handle(tokens)[upto(rows)]], f32);
  } else {
    x = F::copy(Handle(embed)[{at(token)}], f32).reshape({1, c.dim});
  }
  x = embedded(x.bounded(0, count));
  Rows place;
  place.start = position;
  for (size_t i = 0; i < layer_count(); ++i) x = block(i, x, place, n);

  // The last valid row's logits pick the next token; it goes where it will sit.
  Handle last = prefill ? F::copy(x[at(Affine(rows) - 1)]) : x.reshape({c.dim});
  Handle logits = F::linear(F::rms_norm(last, c.dim, norm, c.rms_eps), output, {}, options_.precision);
  // The settings are per call: a prefill given them keeps them for its sequence's decode steps,
  // so no request recompiles anything.
  Handle kept = Handle(settings)[window(0, 1)];
  if (prefill && sampling) {
    if (sampling.shape() != Shape{F::kSampleSettingsWords} || sampling->dtype() != i32)
      value_error(name() + ": the sampling input is (" + std::to_string(F::kSampleSettingsWords) +
                  ",) i32 (functional::sample_settings), not " + Handle(sampling).str());
    kept.assign(Handle(sampling).reshape({1, F::kSampleSettingsWords}));
  }
  Handle next = F::sample(logits, kept, step, position);
  std::vector<Handle> outs{logits, next};
  if (prefill && options_.all_logits) outs.push_back(F::linear(F::rms_norm(x, c.dim, norm, c.rms_eps), output));
  CarryValue next_position = prefill ? CarryValue(F::scalar({position, rows})) : CarryValue(Affine(position) + 1);
  return Outputs(outs, carry({{"token", next}, {"position", next_position}, {"step", Affine(step) + 1}}));
}

std::unique_ptr<DecoderModel> make_decoder(const LlamaConfig& config, const LlamaOptions& options) {
  if (config.architecture == "gemma3") return std::make_unique<Gemma3Model>(config, options);
  return std::make_unique<LlamaModel>(config, options);
}

}  // namespace iron::models
