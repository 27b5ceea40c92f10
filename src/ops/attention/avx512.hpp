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

// The sums of sixteen vectors' lanes, in three steps that a kernel may interleave with its
// products (the decode tile sums eight keys' products at a time, to fit its registers).
// quad4: 128-bit lane k of the result, element i: the sum over lane k of x[i] (four vectors).
[[maybe_unused]] inline __m512 quad4(const __m512 x[4]) {
  const __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
  const __m512 b = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
  const __m512d ad = _mm512_castps_pd(a), bd = _mm512_castps_pd(b);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ad, bd)), _mm512_castpd_ps(_mm512_unpackhi_pd(ad, bd)));
}

// Two quads' 128-bit lanes added in pairs: [q0.L0 + q0.L2, q0.L1 + q0.L3, q1.L0 + q1.L2, q1.L1 + q1.L3].
[[maybe_unused]] inline __m512 pair_quads(__m512 q0, __m512 q1) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(q0, q1, 0x44), _mm512_shuffle_f32x4(q0, q1, 0xee));
}

// Two pairs of quads (vectors 0-7 and 8-15) to the sixteen sums, sum i in lane i.
[[maybe_unused]] inline __m512 sum_pairs(__m512 h01, __m512 h23) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xdd));
}

// Lane i of the result: the sum of the sixteen lanes of s[i]. A transpose-and-add tree, ~3
// instructions a key instead of a horizontal reduction (~10, in one dependent chain) each.
[[maybe_unused]] inline __m512 sum_each(const __m512 s[16]) {
  return sum_pairs(pair_quads(quad4(s), quad4(s + 4)), pair_quads(quad4(s + 8), quad4(s + 12)));
}

}  // namespace
}  // namespace iron::ops::attention
