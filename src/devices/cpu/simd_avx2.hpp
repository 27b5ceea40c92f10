// Vector helpers for files compiled for AVX2 (*_avx2.cpp, and the K-quant loops of
// ops/gemm/quant_blocks.hpp, built into the AVX2 and AVX-512 files alike). Everything here has
// internal linkage: no AVX2 copy of an inline function can be picked for baseline callers.
#pragma once

#include <immintrin.h>

namespace iron::cpu::avx2 {
namespace {

// The sum of 8 lanes: the high half onto the low, then pairs, then the last two (the order
// every 8-lane loop's result depends on, so each caller sums alike).
[[maybe_unused]] inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace iron::cpu::avx2
