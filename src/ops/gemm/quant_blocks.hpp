// The f32 matmul loops for GGUF's K-quant kinds (q4_k, q5_k, q6_k), written once and built into
// each instruction-set file (gemm_avx2.cpp, gemm_avx512.cpp), which first defines `Lanes`, its
// f32 vector width:
//   Acc; zero(); sum(Acc); sum32(x): the sum of 32 floats;
//   fma32<Halves>(q, x, s0, s1, acc): acc + q_i x_i times s0 for i < 16, s1 for i >= 16
//     (Halves false: s0 == s1), q 32 int8 values, x 32 floats;
//   store32<Halves>(q, s0, s1, offset, out): out_i = q_i s_(i / 16) + offset.
// Everything here has internal linkage (an anonymous namespace), so each file's copy is built
// for that file's instruction set alone; gemm_hwy.cpp's copy of each width calls its file's.
// (q5_0 and q5_1, blocks of 32, take gemm_hwy.cpp's loops of q4_0 and q4_1, which add the fifth
// bits to their lanes, and their int8 layout.)
//
// Every kind decodes the same way: a super-block of 256 weights is 8 sub-blocks of 32, each 32
// signed int8 quants q (one 256-bit register, built with AVX2 byte operations) with
// w_i = scale_(i / 16) q_i + offset (the two scales differ only for q6_k, whose scales cover 16
// weights). Then
//   GEMV (f32 sums, Precision::highest): sum_i w_i x_i = scale * sum_i q_i x_i + offset * sum_i x_i,
//     the quants converted to f32 and multiplied with x in the ISA's lanes, the offsets meeting
//     the sub-blocks' sums of x;
//   the tile path's rows: w_i dequantised to f32 (store32), then the ISA's f32 tiles.
// (The int8 path, Precision::medium, reads them rearranged: kernels.hpp, gemm_avx512.cpp.)
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "devices/cpu/simd_avx2.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

inline float quant_half(const char* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/// A block's scales and offsets: weight i of sub-block s is scale[s] q_i + offset[s], or with
/// kHalves scale[2 s + i / 16] q_i (offsets are set only for kinds with kOffset).
struct QuantScales {
  alignas(32) float scale[16];
  alignas(32) float offset[8];
  template <class K>
  float first(int64_t s) const { return scale[K::kHalves ? 2 * s : s]; }
  template <class K>
  float second(int64_t s) const { return scale[K::kHalves ? 2 * s + 1 : s]; }
};

/// 8 bytes as f32 times `by`, into out[0..8).
inline void quant_bytes_times(uint64_t bytes, float by, float* out) {
  _mm256_store_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(bytes)))),
                                     _mm256_set1_ps(by)));
}

// ---- the kinds --------------------------------------------------------------------------
// Each: kElements and kBytes of a block, kSubs sub-blocks of 32 in it, kOffset (whether any
// offset is nonzero), kHalves (whether the two scales of a sub-block differ); scales() the
// block's scales and offsets, quants() sub-block s's 32 quants.

// q4_k and q5_k (Fifth): f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums (dtype.cpp),
// (q5_k) 32 bytes of fifth bits (byte l, bit j: element l of sub-block j), 128 bytes of nibbles
// (sub-blocks 2p and 2p + 1 the low and high nibbles of bytes 32p .. 32p + 31);
// w = d scale_j q - dmin minimum_j.
template <bool Fifth>
struct KBlocks {
  static constexpr int64_t kElements = 256, kBytes = Fifth ? 176 : 144, kSubs = 8;
  static constexpr bool kOffset = true, kHalves = false;
  static void scales(const char* b, QuantScales& s) {
    // k_scale_min for all 8 sub-blocks at once, 4 bytes to a word: scales and minimums 0-3 are
    // the low 6 bits of words 0 and 1; 4-7 a nibble of word 2 under the top 2 bits of 0 and 1.
    uint32_t w[3];
    __builtin_memcpy(w, b + 4, 12);
    const uint32_t six = 0x3f3f3f3f, nibble = 0x0f0f0f0f, top = 0x30303030;
    const uint64_t scale = (w[0] & six) | uint64_t((w[2] & nibble) | ((w[0] >> 2) & top)) << 32;
    const uint64_t minimum = (w[1] & six) | uint64_t(((w[2] >> 4) & nibble) | ((w[1] >> 2) & top)) << 32;
    quant_bytes_times(scale, quant_half(b), s.scale);
    quant_bytes_times(minimum, -quant_half(b + 2), s.offset);
  }
  static __m256i quants(const char* b, int64_t j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + (Fifth ? 48 : 16) + 32 * (j / 2)));
    const __m256i q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
    if constexpr (!Fifth) return q;
    const __m256i bit = _mm256_set1_epi8(char(1 << j));
    const __m256i fifth = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(fifth, bit), bit);
    return _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  }
};

// q6_k: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales (one per 16
// weights), f16 d; w = d scale (q - 32). Sub-block j = 4h + c (h a half of 128 weights) takes
// low nibbles (c < 2) or high ones of bytes 64h + 32 (c % 2) .., and bits 2c, 2c + 1 of bytes
// 128 + 32h ..; its scales are 8h + 2c and 8h + 2c + 1.
struct Q6KBlocks {
  static constexpr int64_t kElements = 256, kBytes = 210, kSubs = 8;
  static constexpr bool kOffset = false, kHalves = true;
  static void scales(const char* b, QuantScales& s) {
    // Scale 2j + h (h the half) is byte 8 (j / 4) + 2 (j % 4) + h = 2j + h: the bytes' order.
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256 d = _mm256_set1_ps(quant_half(b + 208));
    _mm256_store_ps(s.scale, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), d));
    _mm256_store_ps(s.scale + 8,
                    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8))), d));
  }
  static __m256i quants(const char* b, int64_t j) {
    const int64_t h = j / 4, c = j % 4;
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32 * (c % 2)));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
    const __m256i mask = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x03);
    const __m256i lo = _mm256_and_si256(c < 2 ? low : _mm256_srli_epi16(low, 4), mask);
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(high, _mm_cvtsi64_si128(2 * c)), two);
    return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
  }
};

/// Calls fn(Kind{}) with the kind of `t`; returns false for a kind these loops do not take.
template <class Fn>
bool with_quant_kind(DType t, Fn&& fn) {
  switch (t) {
    case DType::q4_k:
      return fn(KBlocks<false>{}), true;
    case DType::q5_k:
      return fn(KBlocks<true>{}), true;
    case DType::q6_k:
      return fn(Q6KBlocks{}), true;
    default:
      return false;
  }
}

// ---- GEMV (f32 sums) -----------------------------------------------------------------------

// Rows are prefetched this many rows ahead, as the other GEMV loops do.
constexpr int64_t kQuantAhead = 8;

template <class L, class K, int R>
void quant_gemv_rows(const GemvArgs& g, const char* w, float* y) {
  typename L::Acc acc[R];
  __m256 corr[R];
  for (int r = 0; r < R; ++r) acc[r] = L::zero(), corr[r] = _mm256_setzero_ps();
  const int64_t blocks = g.k / K::kElements;
  for (int64_t b = 0; b < blocks; ++b) {
    const char* blk[R];
    QuantScales sc[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w + r * g.row_bytes + b * K::kBytes;
      for (int64_t line = 0; line < K::kBytes; line += 64)
        _mm_prefetch(blk[r] + kQuantAhead * g.row_bytes + line, _MM_HINT_T0);
      K::scales(blk[r], sc[r]);
      // The block's 8 offsets times x's sums of its 8 sub-blocks.
      if constexpr (K::kOffset)
        corr[r] = _mm256_fmadd_ps(_mm256_load_ps(sc[r].offset), _mm256_loadu_ps(g.xsum + 8 * b), corr[r]);
    }
    for (int64_t s = 0; s < K::kSubs; ++s) {
      const float* x = g.x + b * K::kElements + 32 * s;
      for (int r = 0; r < R; ++r)
        acc[r] = L::template fma32<K::kHalves>(K::quants(blk[r], s), x, sc[r].template first<K>(s),
                                                sc[r].template second<K>(s), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = L::sum(acc[r]) + cpu::avx2::hsum8(corr[r]);
}

/// The GEMV loop for a K-quant: four rows at a time share each load of x.
template <class L>
bool quant_gemv(const GemvArgs& g) {
  return with_quant_kind(g.dtype, [&](auto kind) {
    using K = decltype(kind);
    if constexpr (K::kOffset)
      for (int64_t b = 0; b < g.k / 32; ++b) g.xsum[b] = L::sum32(g.x + 32 * b);
    int64_t r = 0;
    for (; r + 4 <= g.rows; r += 4) quant_gemv_rows<L, K, 4>(g, g.w + r * g.row_bytes, g.y + r);
    for (; r < g.rows; ++r) quant_gemv_rows<L, K, 1>(g, g.w + r * g.row_bytes, g.y + r);
  });
}

/// One row of W (k weights) of a K-quant as f32, for the tile path.
template <class L>
bool quant_dequantise(DType t, const char* w, int64_t k, float* out) {
  return with_quant_kind(t, [&](auto kind) {
    using K = decltype(kind);
    for (int64_t b = 0; b < k / K::kElements; ++b, w += K::kBytes) {
      QuantScales sc;
      K::scales(w, sc);
      for (int64_t s = 0; s < K::kSubs; ++s, out += 32)
        L::template store32<K::kHalves>(K::quants(w, s), sc.template first<K>(s), sc.template second<K>(s),
                                        K::kOffset ? sc.offset[s] : 0.0f, out);
    }
  });
}

}  // namespace
}  // namespace iron::ops::gemm
