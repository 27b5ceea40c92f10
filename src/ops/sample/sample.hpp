// The sampler's random draw, shared by every device. A draw is keyed by the 64-bit seed (a
// Sample operator's `seed` param, or its settings operand below) and two per-call words: a counter of
// calls since generation began and the position of the token drawn. The Vulkan device, the server
// and any other device must draw through sample_uniform() so that one seed gives the same tokens
// everywhere.
#pragma once

#include <cstdint>
#include <cstring>

#include "iron/sampling.hpp"

namespace iron::ops {

/// splitmix64's finaliser: a bijection of 64-bit words that mixes every bit into every other.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform double in [0, 1) for (seed, counter, position). Any 64-bit seed works; for one seed,
/// distinct (counter, position) pairs below 2^32 each give distinct 64-bit states.
inline double sample_uniform(uint64_t seed, int64_t counter, int64_t position) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  const uint64_t words = (uint64_t(counter) << 32) ^ uint64_t(position);
  const uint64_t z = mix64(mix64(seed + kGolden) ^ words);
  return double(z >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

/// Per-call sampling settings (iron::Sampling), as the Sample operator reads them from its second
/// operand: one i32 row of kSettingsWords words, each holding 16 bits (so that every word is exact
/// in the f32 a reference sees): words 0-3 the temperature's float64 bits, 4-7 top_p's, 8-11 the
/// seed, 12-13 top_k (unsigned 32 bits), 14-15 zero; the lowest 16 bits first. The doubles travel
/// whole, so a setting gives bit for bit the draws of the same setting as a compile-time param.
inline constexpr int64_t kSettingsWords = kSampleSettingsWords;

/// The words of `s` (checked by the caller: SamplingRow checks, then encodes).
inline void encode_settings(const Sampling& s, int32_t* words) {
  uint64_t t, p;
  std::memcpy(&t, &s.temperature, 8);
  std::memcpy(&p, &s.top_p, 8);
  const uint64_t parts[3] = {t, p, s.seed};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) words[i * 4 + j] = int32_t((parts[i] >> (16 * j)) & 0xFFFF);
  const auto k = uint32_t(s.top_k);
  words[12] = int32_t(k & 0xFFFF);
  words[13] = int32_t(k >> 16);
  words[14] = words[15] = 0;
}

/// The settings in `words` (int32 from a kernel, or float from a reference); whatever they hold
/// gives settings a sampler can run: each word's low 16 bits are read, a temperature that is not
/// a positive number is greedy, a top_p outside (0, 1] is 1, and a top_k past 2^31 is 0 (all).
template <class Word>
Sampling decode_settings(const Word* words) {
  auto part = [&](int i) {
    uint64_t v = 0;
    for (int j = 0; j < 4; ++j) v |= uint64_t(uint32_t(int64_t(words[i * 4 + j])) & 0xFFFF) << (16 * j);
    return v;
  };
  Sampling s;
  const uint64_t t = part(0), p = part(1);
  std::memcpy(&s.temperature, &t, 8);
  std::memcpy(&s.top_p, &p, 8);
  s.seed = part(2);
  const uint32_t k = (uint32_t(int64_t(words[12])) & 0xFFFF) | ((uint32_t(int64_t(words[13])) & 0xFFFF) << 16);
  s.top_k = k > uint32_t(INT32_MAX) ? 0 : int64_t(k);
  if (!(s.temperature > 0)) s.temperature = 0;  // NaN too
  if (!(s.top_p > 0 && s.top_p <= 1)) s.top_p = 1;
  return s;
}

/// The most top-k candidates the Vulkan shader draws from (sample.comp gathers and sorts them in
/// shared memory); top_k 0 (every logit) or more than this at a temperature is not drawn there.
inline constexpr int64_t kVulkanMaxTopK = 256;
/// Whether the Vulkan shader draws with `top_k` over `n` logits (0: all of them).
inline bool vulkan_draws(int64_t top_k, int64_t n) {
  const int64_t k = top_k > 0 && top_k < n ? top_k : n;
  return k <= kVulkanMaxTopK;
}

}  // namespace iron::ops
