// GELU over f32 rows with 512-bit registers. The tanh form: 0.5 x (1 + tanh(u)) is x / (1 + e^(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3), with a vector e^x (Gemma's feed-forward runs it on every
// element of its 2048-wide rows; the scalar tanh in double took a third of a prefill). The exact
// form: 0.5 x (1 + erf(x / sqrt 2)) with gelu.hpp's polynomials for erf (a BERT encoder's
// feed-forward; the scalar erf was an eighth of all-MiniLM-L6-v2's time).
#ifndef __clang__  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>

#include "devices/cpu/simd_avx512.hpp"
#include "ops/gelu/gelu.hpp"

namespace iron::ops {

namespace {
// Each lane's interval's coefficient of each degree, from the 8 of a table row.
__m512 erf16(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512i i = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_add_ps(ax, ax)), _mm512_set1_epi32(7));
  const __m512 u = _mm512_sub_ps(ax, _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f)));
  auto row = [&](int d) { return _mm512_permutexvar_ps(i, _mm512_castps256_ps512(_mm256_loadu_ps(kErfPoly[d]))); };
  __m512 r = row(kErfDegree);
  for (int d = kErfDegree - 1; d >= 0; --d) r = _mm512_fmadd_ps(r, u, row(d));
  r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(4.0f), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
  // erf is odd: |x|'s value with x's sign.
  return _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(r), _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(int32_t(0x80000000u)))));
}
}  // namespace

void gelu_erf_avx512(float* v, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), root_half = _mm512_set1_ps(0.70710678118654752f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, v + i), h = _mm512_mul_ps(half, x);
    _mm512_mask_storeu_ps(v + i, m, _mm512_fmadd_ps(h, erf16(_mm512_mul_ps(x, root_half)), h));
  }
}

void gelu_tanh_avx512(float* v, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(-2.0f * 0.7978845608028654f),
               cube = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, v + i);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(cube, x), _mm512_mul_ps(x, x), x);  // x + 0.044715 x^3
    const __m512 arg = _mm512_mul_ps(c, inner);
    const __m512 e = cpu::avx512::exp16(arg);  // e^(-2u)
    // exp16 holds its argument to 88.7, where e^(-2u) is past the largest float: x / (1 + e)
    // is then 0 (not x / 3e38, which is far from 0 for x near -3e38).
    const __m512 y = _mm512_mask_mov_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)),
                                        _mm512_cmp_ps_mask(arg, _mm512_set1_ps(88.0f), _CMP_GT_OQ), _mm512_setzero_ps());
    _mm512_mask_storeu_ps(v + i, m, y);
  }
}

}  // namespace iron::ops
