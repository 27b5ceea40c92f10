// The K-quants' f32 loops (quant_blocks.hpp: AVX2 byte shuffles) in 8 lanes, for gemm_hwy.cpp's
// AVX2 copy (the loops every width shares are there; the int8 loop is int8_avx2.cpp's).
// Only intrinsics and plain loops here: no library code built for AVX2 can leak out.
#include <immintrin.h>

#include "devices/cpu/simd_avx2.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

using cpu::avx2::hsum8;

// The f32 lanes of the K-quant loops (quant_blocks.hpp): 32 quants as four vectors of 8.
struct Lanes {
  using Acc = __m256;
  static Acc zero() { return _mm256_setzero_ps(); }
  static float sum(Acc a) { return hsum8(a); }
  static float sum32(const float* x) {
    return hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                              _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24))));
  }
  // Quants 8c .. 8c + 7 as f32.
  static __m256 eight(__m256i q, int c) {
    const __m128i half = c < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c % 2 ? _mm_srli_si128(half, 8) : half));
  }
  template <bool Halves>
  static Acc fma32(__m256i q, const float* x, float s0, float s1, Acc acc) {
    const __m256 lo = _mm256_fmadd_ps(eight(q, 1), _mm256_loadu_ps(x + 8), _mm256_mul_ps(eight(q, 0), _mm256_loadu_ps(x)));
    const __m256 hi =
        _mm256_fmadd_ps(eight(q, 3), _mm256_loadu_ps(x + 24), _mm256_mul_ps(eight(q, 2), _mm256_loadu_ps(x + 16)));
    if constexpr (!Halves) return _mm256_fmadd_ps(_mm256_add_ps(lo, hi), _mm256_set1_ps(s0), acc);
    return _mm256_fmadd_ps(hi, _mm256_set1_ps(s1), _mm256_fmadd_ps(lo, _mm256_set1_ps(s0), acc));
  }
  template <bool>
  static void store32(__m256i q, float s0, float s1, float offset, float* out) {
    const __m256 o = _mm256_set1_ps(offset);
    for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + 8 * c, _mm256_fmadd_ps(eight(q, c), _mm256_set1_ps(c < 2 ? s0 : s1), o));
  }
};

}  // namespace
}  // namespace iron::ops::gemm

#include "ops/gemm/quant_blocks.hpp"

namespace iron::ops::gemm {

// What avx2_isa() (gemm_hwy.cpp) takes from this file.
namespace avx2 {
bool quant_gemv(const GemvArgs& g) { return gemm::quant_gemv<Lanes>(g); }
bool quant_dequantise(DType t, const char* w, int64_t k, float* out) { return gemm::quant_dequantise<Lanes>(t, w, k, out); }
}  // namespace avx2

}  // namespace iron::ops::gemm
