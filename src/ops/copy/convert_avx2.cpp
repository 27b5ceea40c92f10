// Copy's f32 -> f16 / bf16 conversions in 8 lanes (convert.hpp).
#include <immintrin.h>

#include "iron/dtype.hpp"
#include "ops/copy/convert.hpp"

namespace iron::ops::copy {

namespace {

// Whether any of the 8 lanes is NaN: those take the scalar conversion, whose NaN is the one
// every other path writes (vcvtps2ph keeps part of the payload).
inline bool any_nan(__m256 x) { return _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0; }

}  // namespace

void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (any_nan(x)) {
      for (int k = 0; k < 8; ++k) dst[i + k] = f32_to_f16(src[i + k]);
      continue;
    }
    // Round to nearest even, as f32_to_f16: overflow to infinity, f16 subnormals exact.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(src + i), x1 = _mm256_loadu_ps(src + i + 8);
    if (any_nan(x0) || any_nan(x1)) {
      for (int k = 0; k < 16; ++k) dst[i + k] = f32_to_bf16(src[i + k]);
      continue;
    }
    // Round to nearest even on the bits, as f32_to_bf16 (vcvtneps2bf16 would flush subnormals).
    auto round = [&](__m256 x) {
      const __m256i b = _mm256_castps_si256(x);
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), one);
      return _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(half, odd)), 16);
    };
    // packus works within 128-bit lanes: put the 64-bit quarters back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(round(x0), round(x1)), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace iron::ops::copy
