// One block (32 columns) of a group of W's rearranged int8 layout (kernels.hpp), as the int8
// path's two loops read it: the AVX-512 VNNI loop (gemm_avx512.cpp: vpdpbusd per 64-byte load)
// and the AMX loop (gemm_amx.cpp: the same 64-byte loads as the rows of a B tile). Both unpack
// a block's quants and finish its int32 sums with these functions, so a row of x gets the same
// f32 operations in the same order on either: the int32 sums are exact, so its outputs are the
// same bits whichever loop (and however many rows of x at once) took it.
// Internal linkage: each instruction-set file builds its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

inline __m512 int8_halves(const char* at) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
}

/// The 16 rows' scales of block b of a group: d, and m the offset that meets x's block sum
/// (q4_1 / q5_1, q4_k / q5_k: zero for the others); q6_k: d16, the scales of its two halves.
/// super_d and super_dmin carry a K-quant super-block's d and dmin from its first block on.
template <DType T>
struct Int8Scales {
  __m512 d, m = _mm512_setzero_ps(), d16[2];
  __m512 super_d, super_dmin;
  void load(const char* group, int64_t b) {
    if constexpr (T == DType::q6_k) {
      const char* header = group + int8_k_header_at(T, b / 8);
      if (b % 8 == 0) super_d = int8_halves(header);
      for (int h = 0; h < 2; ++h)
        d16[h] = _mm512_mul_ps(super_d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                            reinterpret_cast<const __m128i*>(header + 32 + 16 * (2 * (b % 8) + h))))));
    } else if constexpr (int8_k(T)) {
      // Sub-block s's 6-bit scale and minimum (kernels.hpp) times the super-block's d and dmin.
      const char* header = group + int8_k_header_at(T, b / 8);
      const int64_t s = b % 8;
      if (s == 0) super_d = int8_halves(header), super_dmin = int8_halves(header + 32);
      const __m512i sm = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(header + 64 + 16 * s)));
      const __m512i top = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(header + 192 + 16 * (s / 2))));
      const __m512i six = _mm512_and_si512(sm, _mm512_set1_epi32(63));
      const __m512i minimum = _mm512_or_si512(
          _mm512_srli_epi32(sm, 6), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(top, 4 * (s % 2)), _mm512_set1_epi32(15)), 2));
      d = _mm512_mul_ps(super_d, _mm512_cvtepi32_ps(six));
      m = _mm512_mul_ps(super_dmin, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), minimum)));
    } else {
      d = int8_halves(group + int8_d_at(T, b));
      if constexpr (int8_minimum(T)) m = int8_halves(group + int8_m_at(T, b));
    }
  }
};

/// Load pair c (0-3) of a block's quants at `quants`, unpacked to unsigned bytes: `lo` holds
/// columns 8c .. 8c + 3 and `hi` 8c + 4 .. 8c + 7, byte 4j + i row j's column (4 columns of each
/// of the 16 rows: one vpdpbusd operand, or one row of an AMX B tile).
template <DType T>
inline void int8_unpack(const char* quants, int c, __m512i* lo, __m512i* hi) {
  if constexpr (T == DType::q8_0) {
    *lo = _mm512_loadu_si512(quants + 128 * c);
    *hi = _mm512_loadu_si512(quants + 128 * c + 64);
  } else {
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i v = _mm512_loadu_si512(quants + 64 * c);
    *lo = _mm512_and_si512(v, low);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    if constexpr (int8_fifth(T)) {  // plus 16 where bit 2c (low) or 2c + 1 (high) is set
      const __m512i fifth = _mm512_loadu_si512(quants + 256), sixteen = _mm512_set1_epi8(16);
      *lo = _mm512_mask_add_epi8(*lo, _mm512_test_epi8_mask(fifth, _mm512_set1_epi8(char(1 << (2 * c)))), *lo, sixteen);
      *hi = _mm512_mask_add_epi8(*hi, _mm512_test_epi8_mask(fifth, _mm512_set1_epi8(char(2 << (2 * c)))), *hi, sixteen);
    }
    if constexpr (T == DType::q6_k) {  // the top 2 bits: bits 4 (c % 2) (low) and 4 (c % 2) + 2 (high)
      const __m512i top = _mm512_loadu_si512(quants + 256 + 64 * (c / 2)), bits = _mm512_set1_epi8(0x30);
      *lo = _mm512_or_si512(*lo, _mm512_and_si512(c % 2 ? top : _mm512_slli_epi16(top, 4), bits));
      *hi = _mm512_or_si512(*hi, _mm512_and_si512(c % 2 ? _mm512_srli_epi16(top, 2) : _mm512_slli_epi16(top, 2), bits));
    }
  }
}

/// One row of x's block b finished into its 16 accumulators (the group's 16 rows): `dot` the
/// int32 sums of the block (q6_k: dot[0] of columns 0-15, dot[1] of 16-31, each half having
/// its own scale; the others all in dot[0]), `scale` x's block scale, `xsum` its block sum,
/// `xsum16` 32 times its two sums of 16 (QuantiseX8Args).
template <DType T, class Scales>
inline __m512 int8_finish(const Scales& s, const __m512i* dot, float scale, float xsum, const float* xsum16,
                          __m512 acc) {
  // The offset each quant carries, met by x's block sum: q4_0 w = d (q - 8), q5_0 w = d (q - 16),
  // q8_0 w = d (u - 128).
  constexpr float kOffset = T == DType::q8_0   ? -128.0f
                            : T == DType::q4_0 ? -8.0f
                            : T == DType::q5_0 ? -16.0f
                                               : 0.0f;
  if constexpr (T == DType::q6_k) {
    // w = d s (q - 32): each half's sum less 32 times x's sum of those 16 columns (xsum16 holds
    // it so: a broadcast from memory, where a product of two scalars took a multiply and a
    // broadcast from a register for every row of x and group of W).
    for (int h = 0; h < 2; ++h) {
      const __m512 sum = _mm512_fmsub_ps(_mm512_cvtepi32_ps(dot[h]), _mm512_set1_ps(scale), _mm512_set1_ps(xsum16[h]));
      acc = _mm512_fmadd_ps(s.d16[h], sum, acc);
    }
    return acc;
  } else if constexpr (int8_minimum(T) || int8_k(T)) {
    const __m512 sum = _mm512_mul_ps(_mm512_cvtepi32_ps(dot[0]), _mm512_set1_ps(scale));
    return _mm512_fmadd_ps(s.d, sum, _mm512_fmadd_ps(s.m, _mm512_set1_ps(xsum), acc));
  } else {
    const __m512 sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[0]), _mm512_set1_ps(scale), _mm512_set1_ps(kOffset * xsum));
    return _mm512_fmadd_ps(s.d, sum, acc);
  }
}

/// Prefetches a block's lines (int8_prefetch_lines) `ahead` bytes on.
template <DType T>
inline void int8_prefetch(const char* quants, int64_t ahead) {
  for (int c = 0; c < int8_prefetch_lines(T); ++c) _mm_prefetch(quants + ahead + 64 * c, _MM_HINT_T0);
}

}  // namespace
}  // namespace iron::ops::gemm
