// GELU's tanh form over f32 rows with 512-bit registers: 0.5 x (1 + tanh(u)) is x / (1 + e^(-2u)),
// u = sqrt(2/pi) (x + 0.044715 x^3), with a vector e^x (Gemma's feed-forward runs it on every
// element of its 2048-wide rows; the scalar tanh in double took a third of a prefill).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>

#include "devices/cpu/simd_avx512.hpp"

namespace iron::ops {

void gelu_tanh_avx512(float* v, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(-2.0f * 0.7978845608028654f),
               cube = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, v + i);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(cube, x), _mm512_mul_ps(x, x), x);  // x + 0.044715 x^3
    const __m512 e = cpu::avx512::exp16(_mm512_mul_ps(c, inner));                       // e^(-2u)
    _mm512_mask_storeu_ps(v + i, m, _mm512_div_ps(x, _mm512_add_ps(one, e)));
  }
}

}  // namespace iron::ops
