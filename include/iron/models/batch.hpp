// Several sequences decoded together (issue 11's continuous batching), over a decoder graph with
// options.slots cache slots: each sequence in a slot of its own, its prompt fed in chunks, and
// every active sequence stepped in one call of the batched version for that many rows (one
// compiled version per row count, compiled once, on first use). What a server's scheduler
// drives; the host holds each sequence's place (slot, position, step) and picks its rows.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "iron/graph.hpp"
#include "iron/models/decoder.hpp"

namespace iron::models {

class BatchDecoder {
 public:
  /// Over `model` (its weights loaded), its versions compiled with `compile`.
  BatchDecoder(DecoderModel& model, CompileOptions compile = {});

  int64_t slots() const { return model_.options().slots; }

  /// Writes `ids` into slot `slot` from position `position` and returns the token drawn after the
  /// last with `sampling` and the sampler's counter `step` (at the position LlamaRunner::generate
  /// draws it: its last chunk's first). The ids go in calls of `chunk` rows, the rest in one call
  /// (at highest: in calls of the powers of two below the chunk, largest first, the row counts
  /// whose sums a row keeps as its own): a prompt is always cut the same way, so what it leaves
  /// in the cache does not depend on other sequences. A call's rows are rounded up to a power of
  /// two, its version's (the rows past its own bounded off), so calls of many sizes share few
  /// versions.
  int32_t prefill(int64_t slot, int64_t position, std::span<const int32_t> ids, const SamplingRow& sampling,
                  int64_t step = 0);

  /// A prompt going in: its ids, written into `slot` from `position`, `at` of them in so far;
  /// the token after its last drawn with `sampling` and the counter `step`. The settings travel
  /// as their row (made once per sequence, copied into each call's input).
  struct Prompt {
    int64_t slot = 0, position = 0;
    std::span<const int32_t> ids;
    int64_t at = 0;
    SamplingRow sampling;
    int64_t step = 0;
  };
  /// One call taking the next part of several prompts at once, each part cut as prefill() cuts
  /// a prompt: the prompts in order, each that still fits shared_prefill_rows() beside those
  /// taken before it (the first `always` go whatever their rows, and at least the first). A
  /// decode row is a prompt of one id (its token, at its position, `step` its counter): a
  /// scheduler passes its decoding rows first, as `always`, and the prompts going in after
  /// them, so one call makes the step and takes what fits of the prompts. Each taken prompt's `at` moves past its part;
  /// per prompt, the token drawn once its last id is in, else nothing (not taken: nothing). What
  /// a server's scheduler runs when several prompts arrive together: one call for all of them
  /// reads the weights once, where a call each reads them once a prompt.
  std::vector<std::optional<int32_t>> prefill_parts(std::span<Prompt> prompts, size_t always = 1);
  /// Every prompt whole, in calls of prefill_parts(); each prompt's first token, in order.
  std::vector<int32_t> prefill(std::span<Prompt> prompts);
  /// The rows a call of prefill_parts() takes from several prompts: the chunk, except at highest,
  /// where up to kAloneRows rows keep each row's sums its own (the matmuls' GEMV loop for every
  /// row) and more would not, so there parts share a call only up to kAloneRows rows and a
  /// longer part goes alone, as it would with no other prompt beside it.
  int64_t shared_prefill_rows() const;
  /// The rows a call at highest may hold while each row's sums stay those of the row alone.
  static constexpr int64_t kAloneRows = 8;

  /// One row of a decode step: `token` goes in at `position` of `slot`; the next token is drawn
  /// with `sampling` and the counter `step` (a sequence's own: 0 at its first token, + 1 a step).
  struct Row {
    int64_t slot = 0, position = 0;
    int32_t token = 0;
    int64_t step = 0;
    SamplingRow sampling;
  };
  /// One call of the version for rows.size() rows; each row's next token, in order. At highest,
  /// up to 8 rows, a row's token is the one it gets in a call of that row alone (tests/models/
  /// batch_test.cpp).
  std::vector<int32_t> step(std::span<const Row> rows);

  /// The last call's logits, (rows, vocab) of the rows it returned tokens for (a prefill: its
  /// last row): a view of the version's memory, valid until that version's next call.
  const Tensor& logits() const { return logits_; }

 private:
  // Runs tokens.size() rows in the batched version of `capacity` rows (at least as many: the
  // rest bounded off per call), returning the picked rows' tokens.
  std::vector<int32_t> run(std::vector<int32_t> tokens, std::vector<int32_t> positions, std::vector<int32_t> slots,
                           const std::vector<int32_t>& pick, const std::vector<int32_t>& draws,
                           const std::vector<SamplingRow>& sampling, int64_t capacity);

  DecoderModel& model_;
  CompileOptions compile_;
  Tensor logits_;
  // The (rows, picked) of every version run so far, and how many of them only a shared call
  // needed: those are bounded (prefill_parts).
  std::set<std::pair<int64_t, int64_t>> shapes_;
  int64_t shared_versions_ = 0;
  static constexpr int64_t kSharedVersions = 16;
};

}  // namespace iron::models
