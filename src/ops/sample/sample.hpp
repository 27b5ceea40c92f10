// The sampler's random draw, shared by every device. A draw is keyed by the 64-bit seed (the
// Sample operator's `seed` param, the seed's bits as an int64) and two per-call words: a counter of
// calls since generation began and the position of the token drawn. The Vulkan device, the server
// and any other device must draw through sample_uniform() so that one seed gives the same tokens
// everywhere.
#pragma once

#include <cstdint>

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

}  // namespace iron::ops
