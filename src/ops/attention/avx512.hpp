// What the Attention kernels' AVX-512 files share (included by *_avx512.cpp files alone).
// Everything here has internal linkage: no AVX-512 copy of an inline function can be picked for
// baseline callers.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace iron::ops::attention {
namespace {

// Local, not std::min: an inline template instantiated in an AVX-512 file could be the copy
// the linker keeps for baseline callers too.
[[maybe_unused]] inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// Lane i of the result: the sum of the sixteen lanes of s[i]. A transpose-and-add tree, ~3
// instructions a key instead of a horizontal reduction (~10, in one dependent chain) each.
[[maybe_unused]] inline __m512 sum_each(const __m512 s[16]) {
  __m512 quad[4];  // quad[g], 128-bit lane k: the sums over lane k of s[4g .. 4g + 3]
  for (int g = 0; g < 4; ++g) {
    const __m512* x = s + 4 * g;
    const __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
    const __m512 b = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
    const __m512d ad = _mm512_castps_pd(a), bd = _mm512_castps_pd(b);
    quad[g] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ad, bd)),
                            _mm512_castpd_ps(_mm512_unpackhi_pd(ad, bd)));
  }
  // Add the four 128-bit lanes of each quad, leaving quad g in lane g.
  const __m512 h01 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[0], quad[1], 0x44),
                                   _mm512_shuffle_f32x4(quad[0], quad[1], 0xee));
  const __m512 h23 = _mm512_add_ps(_mm512_shuffle_f32x4(quad[2], quad[3], 0x44),
                                   _mm512_shuffle_f32x4(quad[2], quad[3], 0xee));
  return _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xdd));
}

}  // namespace
}  // namespace iron::ops::attention
