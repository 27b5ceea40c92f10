// What every decoder family shares as an IRON graph, like any user's: a prefill version over a
// chunk of up to `chunk` prompt rows (bounded per call) and a decode version for one row, over
// one KV cache per layer. Both sample the next token on the device and carry it and the position
// into the next call, so decoding runs in a CarriedLoop. A family (llama.hpp, gemma3.hpp, qwen2.hpp) adds
// its blocks; the embedding, the classifier, sampling, the carried values and the cache writes
// are here, once.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "iron/graph.hpp"
#include "iron/models/llama_config.hpp"
#include "iron/sampling.hpp"

namespace iron::models {

struct LlamaOptions {
  int64_t context = 2048;  // KV-cache rows (at most the model's)
  int64_t chunk = 64;      // prompt rows a prefill call takes
  /// Sequences the KV cache holds at once (a server's --parallel): `slots` regions of
  /// context + chunk rows per layer, each a sequence of its own (docs/design.md, batching).
  int64_t slots = 1;
  bool all_logits = false; // prefill returns logits for every row (scoring), not just the last
  Sampling sampling;        // what LlamaRunner::generate passes unless given other settings
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
/// Throws iron::Error unless `t` is a cache type a decoder graph takes for a head of `head_dim`.
void check_cache_type(DType t, int64_t head_dim, const char* which);

/// What every family's block holds besides its own params: the layer's KV cache, (slots *
/// (context + chunk), kv_heads, head_dim) each in the options' types: a region per slot, one row
/// past the context per prompt row, so a chunk's window never runs off the end of its slot.
class DecoderBlock : public Module {
 public:
  DecoderBlock(const LlamaConfig& c, const LlamaOptions& options);
  DecoderBlock() = default;  // an encoder's block (the same params): no cache
  State k_cache, v_cache;
};

/// The cosines then sines of RoPE angles at base `base` for positions 0 .. rows - 1, (rows,
/// head_dim): the table a model's RoPE steps read their rows from.
Tensor rope_cos_sin_table(double base, int64_t head_dim, int64_t rows);

/// The graph's skeleton. Inputs: `tokens` (rows,) i32, present for prefill and absent for decode.
/// `sampling` (kSampleSettingsWords,) i32, optional, prefill only: the sampling settings
/// (functional::sample_settings), kept in the state `settings` for this call and the decode
/// steps after it (a prefill without it keeps the settings already there; zeros, greedy, at first).
/// Per-call values: `position` (carried: where this call's first row sits), `token` (carried:
/// the token a decode call embeds), `step` (carried: calls since generation began, the sampler's
/// counter), `rows` (valid prompt rows of a prefill call). Outputs: the logits of the last valid
/// row (or of every row with all_logits) and the sampled token, which a decode step carries into
/// the next as `token` (CarriedLoop::Steps::carried reads it).
///
/// With several cache slots (options.slots), the prefill and decode versions work on slot 0. A
/// batched version takes B rows at once, each of any sequence (a decode step's row, or one of a
/// prompt's consecutive rows: rows of one call see each other's keys up to their positions):
/// inputs `tokens`, `positions` and `slots` (B,) i32, row b embedding tokens[b] at position
/// positions[b] of cache slot slots[b], for the call's first `batch_rows` rows (a per-call value
/// every batched call gives, at most B: the rows past it are not computed, nor written to the
/// cache, and a pick of one reads what an earlier call left there); `pick` (P,) i32, the rows
/// whose logits and tokens it
/// returns (every row of a decode step, a prompt chunk's last), each drawn with its own row of
/// `sampling` (P, kSampleSettingsWords) i32, and keyed by its row of `draws` (P, 2) i32: the
/// sampler's counter and the position it mixes in (ops::sample_uniform).
/// Outputs: the logits (P, vocab) and the tokens (P,) i32; it carries nothing (the host holds
/// each sequence's place). A position outside [0, context), a slot outside [0, slots) or a pick
/// outside [0, B) is an IndexError before the call runs.
class DecoderModel : public Graph {
 public:
  Outputs body() final;

  const LlamaConfig& config() const { return config_; }
  const LlamaOptions& options() const { return options_; }

  Input tokens, sampling;
  Input positions, slots, pick, draws;  // a batched call's
  Scratchpad rows, batch_rows;
  Carried position, token, step;
  Param embed, norm, output;
  State settings;   // (1, kSampleSettingsWords) i32: the sampling settings of slot 0's sequence

 protected:
  DecoderModel(const std::string& name, const LlamaConfig& config, const LlamaOptions& options);
  /// Where a call's rows sit: one sequence's rows from position `start` (slot 0), or (a batched
  /// call) each row at its own position and slot, `cache_rows` their rows in the cache.
  struct Rows {
    Affine start;
    Handle positions, slots, cache_rows;
    bool batch() const { return positions.defined(); }
    // A batched call's RoPE rows, gathered once for every layer (by table): rope_rows() fills it
    // while the body records, every layer reading one Rows.
    mutable std::map<const Weight*, Handle> rope_gathered;
  };
  /// Layer `layer` over `n` rows of x (bounded per call) placed as `at` says.
  virtual Handle block(size_t layer, Handle x, const Rows& at, int64_t n) = 0;
  /// The RoPE table's rows for this call's rows (cosines then sines, as rope_cos_sin_table()):
  /// a window of it, or (a batched call) its rows at the call's positions, gathered once a call.
  Handle rope_rows(const Weight& table, const Rows& at, int64_t n) const;
  /// The embedded rows, before the first block (Gemma scales them).
  virtual Handle embedded(Handle x) { return x; }
  size_t layer_count() const { return size_t(config_.layers); }

  /// y (n, count * head_dim) as heads (n, count, head_dim), bounded as x.
  Handle heads(const Handle& y, int64_t count, const Handle& x, int64_t n) const;
  /// Where this call's keys and values go (rows start .. start + n of the cache), handed to the
  /// steps that make them when the cache is f32 so they write in place; empty otherwise.
  struct CacheRows {
    Handle k, v;  // the windows
    Handle k_into, v_into;  // the windows when written in place, else empty
  };
  CacheRows cache_rows(DecoderBlock& block, const Rows& at, int64_t n) const;
  /// Rounds k and v into their windows unless they were written there in place, then attends q
  /// to the cache up to each row's position (the last `window` positions of it, when given).
  Handle attend(DecoderBlock& block, const CacheRows& rows, const Handle& q, const Handle& k, const Handle& v,
                const Rows& at, std::optional<double> scale = {}, int64_t window = 0);
  /// The cosines then sines of RoPE angles at base `base` for every row the cache holds.
  Tensor rope_cos_sin_table(double base) const {
    return models::rope_cos_sin_table(base, config_.head_dim, rows_held());
  }
  /// Rows of one slot (and of the RoPE table): context + chunk.
  int64_t rows_held() const { return options_.context + options_.chunk; }

  LlamaConfig config_;
  LlamaOptions options_;

 private:
  Outputs batch_body();
};

/// The graph of `config`'s family (config.architecture: "llama", "gemma3" or "qwen2").
std::unique_ptr<DecoderModel> make_decoder(const LlamaConfig& config, const LlamaOptions& options = {});

}  // namespace iron::models
