// A Llama-family decoder as an IRON graph, like any user's: a prefill version over a chunk of up
// to `chunk` prompt rows (bounded per call) and a decode version for one row, over one KV cache.
// Both sample the next token on the device and carry it and the position into the next call, so
// decoding runs in a CarriedLoop.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "iron/graph.hpp"
#include "iron/models/llama_config.hpp"

namespace iron::models {

/// How the next token is chosen on the device. temperature 0: greedy (the seed is not read). Any
/// 64-bit seed works: it is the Sample operator's param, mixed with the per-call counter `step`
/// and the position by ops::sample_uniform.
struct Sampling {
  double temperature = 0.0;
  int64_t top_k = 40;
  double top_p = 0.95;
  uint64_t seed = 0;
};

struct LlamaOptions {
  int64_t context = 2048;  // KV-cache rows (at most the model's)
  int64_t chunk = 64;      // prompt rows a prefill call takes
  bool all_logits = false; // prefill returns logits for every row (scoring), not just the last
  Sampling sampling;
  /// The KV cache's element types: f32, f16, bf16 or q8_0 (head_dim a multiple of 32), keys and
  /// values each. Unset: see k_cache_type().
  std::optional<DType> k_cache_dtype, v_cache_dtype;
  /// How the matmuls may round: highest (f32 sums, rounded once), high, or medium (activations
  /// rounded to int8 blocks where the CPU has VNNI, as llama.cpp does).
  Precision precision = Precision::highest;

  /// The cache types a graph uses: the ones set, else f32 at highest and high (nothing rounds the
  /// keys and values), and at medium kMediumCacheDtype, the smallest type whose cost in accuracy
  /// is within what medium's matmuls already cost (docs/design.md gives the figures).
  DType k_cache_type() const;
  DType v_cache_type() const;
};

/// The default cache type at medium precision.
extern const DType kMediumCacheDtype;
/// Throws iron::Error unless `t` is a cache type a Llama graph takes for a head of `head_dim`.
void check_cache_type(DType t, int64_t head_dim, const char* which);

class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& c);
  Param q, k, v, o;
};

class LlamaFeedForward : public Module {
 public:
  explicit LlamaFeedForward(const LlamaConfig& c);
  Param gate, up, down;
};

class LlamaBlock : public Module {
 public:
  LlamaBlock(const LlamaConfig& c, const LlamaOptions& options);
  Param attn_norm;
  LlamaAttention attn;
  Param ffn_norm;
  LlamaFeedForward ffn;
  State k_cache, v_cache;
};

/// The graph. Inputs: `tokens` (rows,) i32, present for prefill and absent for decode. Per-call
/// values: `position` (carried: where this call's first row sits), `token` (carried: the token a
/// decode call embeds), `step` (carried: calls since generation began, the sampler's counter),
/// `rows` (valid prompt rows of a prefill call). Outputs: the logits of the
/// last valid row (or of every row with all_logits) and the sampled token, also written to the
/// state `generated` at the position it will occupy.
class LlamaModel : public Graph {
 public:
  LlamaModel(const LlamaConfig& config, const LlamaOptions& options = {});
  Outputs body() override;

  const LlamaConfig& config() const { return config_; }
  const LlamaOptions& options() const { return options_; }

  Input tokens;
  Scratchpad rows;
  Carried position, token, step;
  Param embed, norm, output;
  std::vector<std::unique_ptr<LlamaBlock>> layers;
  Weight rope_table;  // (context + chunk, head_dim): cosines then sines per position
  State generated;    // (context + chunk,) i32: the token sampled for each position

 private:
  Handle block(LlamaBlock& b, Handle x, const Affine& start, int64_t n);
  LlamaConfig config_;
  LlamaOptions options_;
};

/// The cosines then sines of RoPE angles for each position (rows, head_dim).
Tensor rope_table(const LlamaConfig& config, int64_t rows);

}  // namespace iron::models
