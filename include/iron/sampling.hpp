// A request's sampling settings: the one type every layer takes (the Sample operator's per-call
// operand, the models, the engine, the command line and the server), and the row of words the
// operator reads them from, made once per request.
#pragma once

#include <array>
#include <cstdint>

namespace iron {

/// How the next token is chosen on the device. temperature 0: greedy (the seed is not read).
/// top_k 0: every token. Any 64-bit seed works: mixed with the per-call counter `step` and the
/// position by ops::sample_uniform. A graph reads them per call (as a SamplingRow), so they change
/// without recompiling.
struct Sampling {
  double temperature = 0.0;
  int64_t top_k = 40;
  double top_p = 0.95;
  uint64_t seed = 0;

  /// A value error unless temperature is finite and >= 0, 0 <= top_k < 2^31 and 0 < top_p <= 1.
  void check() const;
};

/// Words in a row of sampling settings.
inline constexpr int64_t kSampleSettingsWords = 16;

/// `Sampling` as the Sample operator reads it from its settings operand: kSampleSettingsWords i32
/// words, each holding 16 bits so that every word is exact in the f32 a reference sees (the
/// temperature's and top_p's float64 bits and the seed, 4 words each, then top_k in 2). Made once
/// per request and copied into each call's input, so a setting gives bit for bit the draws of the
/// same setting as a compile-time param.
struct SamplingRow {
  /// The default settings' row.
  SamplingRow() : SamplingRow(Sampling{}) {}
  /// Checks `s` (Sampling::check) and encodes it. Implicit: wherever a row is taken, settings are.
  SamplingRow(const Sampling& s);  // NOLINT(google-explicit-constructor)
  std::array<int32_t, kSampleSettingsWords> words{};
};

}  // namespace iron
