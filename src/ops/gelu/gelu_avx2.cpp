// The exact GELU over f32 rows with 256-bit registers: 0.5 x (1 + erf(x / sqrt 2)), erf from the
// polynomials of gelu.hpp, each lane's interval's coefficients permuted in (8 intervals, 8 lanes).
#include <immintrin.h>

#include <cstdint>

#include "ops/gelu/gelu.hpp"

namespace iron::ops {

namespace {
__m256 erf8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  // The interval: floor(2 |x|), held to 7; its centre 0.5 i + 0.25.
  const __m256i i = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(ax, ax)), _mm256_set1_epi32(7));
  const __m256 u = _mm256_sub_ps(ax, _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(0.5f), _mm256_set1_ps(0.25f)));
  __m256 r = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kErfPoly[kErfDegree]), i);
  for (int d = kErfDegree - 1; d >= 0; --d) r = _mm256_fmadd_ps(r, u, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kErfPoly[d]), i));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(1.0f), _mm256_cmp_ps(ax, _mm256_set1_ps(4.0f), _CMP_GE_OQ));
  return _mm256_or_ps(r, _mm256_and_ps(x, sign));
}
}  // namespace

void gelu_erf_avx2(float* v, int64_t n) {
  const __m256 half = _mm256_set1_ps(0.5f), root_half = _mm256_set1_ps(0.70710678118654752f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i), h = _mm256_mul_ps(half, x);
    _mm256_storeu_ps(v + i, _mm256_fmadd_ps(h, erf8(_mm256_mul_ps(x, root_half)), h));
  }
  if (i < n) {
    // The tail through the same lanes: a copy of its values, padded with zeros.
    alignas(32) float tail[8] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = v[j];
    const __m256 x = _mm256_load_ps(tail), h = _mm256_mul_ps(half, x);
    _mm256_store_ps(tail, _mm256_fmadd_ps(h, erf8(_mm256_mul_ps(x, root_half)), h));
    for (int64_t j = i; j < n; ++j) v[j] = tail[j - i];
  }
}

}  // namespace iron::ops
