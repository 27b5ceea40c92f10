// LayerNorm's row with 512-bit registers: the mean and the variance summed in double, 8 lanes at
// a time (two sums each), then (x - mean) * scale * weight in double and rounded once, as the
// scalar row does; only the order of the sums differs from it.
#ifndef __clang__  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace iron::ops {

void layer_norm_row_avx512(const float* x, const float* weight, float* y, int64_t n, double epsilon) {
  auto mask = [&](int64_t i) { return n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1); };
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(mask(i), x + i);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  const double mean = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / double(n);
  const __m512d m = _mm512_set1_pd(mean);
  __m512d q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = mask(i);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    // Lanes past n are masked out of the sums (x - mean there is -mean, not 0).
    const __m512d d0 = _mm512_maskz_sub_pd(__mmask8(k), _mm512_cvtps_pd(_mm512_castps512_ps256(v)), m);
    const __m512d d1 = _mm512_maskz_sub_pd(__mmask8(k >> 8),
                                           _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), m);
    q0 = _mm512_add_pd(q0, _mm512_mul_pd(d0, d0));
    q1 = _mm512_add_pd(q1, _mm512_mul_pd(d1, d1));
  }
  const double var = _mm512_reduce_add_pd(_mm512_add_pd(q0, q1));
  const __m512d scale = _mm512_set1_pd(1.0 / std::sqrt(var / double(n) + epsilon));
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 k = n - i >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - i)) - 1);
    __m512d t = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + i)), m), scale);
    if (weight) t = _mm512_mul_pd(t, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, weight + i)));
    _mm256_mask_storeu_ps(y + i, k, _mm512_cvtpd_ps(t));
  }
}

}  // namespace iron::ops
