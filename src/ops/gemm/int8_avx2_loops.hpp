// The int8 path's loops on 256-bit registers (Precision::medium), included by int8_avx2.cpp
// (AVX2: vpmaddubsw, then vpmaddwd against ones: Avx2Lanes<false>) and int8_avxvnni.cpp
// (AVX-VNNI: vpdpbusd, Avx2Lanes<true>), each compiled for its own instruction set. Everything
// here has internal linkage, so each file's copy is built for that file's instructions alone.
// int8_avx2.cpp's comment says how the loops read W and x; the two files sum each block in
// exactly the same int32 values and finish them alike, so they give the same bits.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "ops/gemm/int8_pass.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

// ---- one half of a group: 8 rows of W ----------------------------------------------------------

inline __m256 halves8(const char* at) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
}
inline __m256i bytes8_u(const char* at) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at)));
}
inline __m256i bytes8_s(const char* at) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at)));
}
inline __m256i load32(const char* at) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
}

/// The 8 rows' scales of block b for half h: as Int8Scales (int8_blocks.hpp) on 8 lanes.
template <DType T>
struct Scales8 {
  __m256 d, m = _mm256_setzero_ps(), d16[2];
  __m256 super_d = _mm256_setzero_ps(), super_dmin = _mm256_setzero_ps();  // set at each super-block's first block
  void load(const char* group, int64_t b, int h) {
    if constexpr (T == DType::q6_k) {
      const char* header = group + int8_k_header_at(T, b / 8);
      if (b % 8 == 0) super_d = halves8(header + 16 * h);
      for (int s = 0; s < 2; ++s)
        d16[s] = _mm256_mul_ps(
            super_d, _mm256_cvtepi32_ps(bytes8_s(header + 32 + 16 * (2 * (b % 8) + s) + 8 * h)));
    } else if constexpr (int8_k(T)) {
      const char* header = group + int8_k_header_at(T, b / 8);
      const int64_t s = b % 8;
      if (s == 0) super_d = halves8(header + 16 * h), super_dmin = halves8(header + 32 + 16 * h);
      const __m256i sm = bytes8_u(header + 64 + 16 * s + 8 * h);
      const __m256i top = bytes8_u(header + 192 + 16 * (s / 2) + 8 * h);
      const __m256i six = _mm256_and_si256(sm, _mm256_set1_epi32(63));
      const __m256i minimum = _mm256_or_si256(
          _mm256_srli_epi32(sm, 6),
          _mm256_slli_epi32(
              _mm256_and_si256(_mm256_srli_epi32(top, int(4 * (s % 2))), _mm256_set1_epi32(15)),
              2));
      d = _mm256_mul_ps(super_d, _mm256_cvtepi32_ps(six));
      m = _mm256_mul_ps(super_dmin,
                        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), minimum)));
    } else {
      d = halves8(group + int8_d_at(T, b) + 16 * h);
      if constexpr (int8_minimum(T)) m = halves8(group + int8_m_at(T, b) + 16 * h);
    }
  }
};

/// Quad c (0-3) of a block's quants for half h, as unsigned bytes (q8_0: signed, its stored +128
/// taken off): `lo` columns 8c .. 8c + 3, `hi` 8c + 4 .. 8c + 7, byte 4j + i row j's column.
template <DType T>
inline void unpack_half(const char* quants, int c, int h, __m256i* lo, __m256i* hi) {
  if constexpr (T == DType::q8_0) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    *lo = _mm256_xor_si256(load32(quants + 128 * c + 32 * h), flip);
    *hi = _mm256_xor_si256(load32(quants + 128 * c + 64 + 32 * h), flip);
  } else {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i v = load32(quants + 64 * c + 32 * h);
    *lo = _mm256_and_si256(v, low);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    if constexpr (int8_fifth(T)) {
      // Plus 16 where bit 2c (low) or 2c + 1 (high) of the fifth bits' byte is set: that bit
      // moved to bit 4 (16-bit shifts; what crosses from the next byte is masked off).
      const __m256i fifth = load32(quants + 256 + 32 * h), sixteen = _mm256_set1_epi8(16);
      auto bit4 = [&](int bit) {
        return _mm256_and_si256(
            bit <= 4 ? _mm256_slli_epi16(fifth, 4 - bit) : _mm256_srli_epi16(fifth, bit - 4),
            sixteen);
      };
      *lo = _mm256_or_si256(*lo, bit4(2 * c));
      *hi = _mm256_or_si256(*hi, bit4(2 * c + 1));
    }
    if constexpr (T ==
                  DType::q6_k) {  // the top 2 bits: bits 4 (c % 2) (low) and 4 (c % 2) + 2 (high)
      const __m256i top = load32(quants + 256 + 64 * (c / 2) + 32 * h),
                    bits = _mm256_set1_epi8(0x30);
      *lo = _mm256_or_si256(*lo, _mm256_and_si256(c % 2 ? top : _mm256_slli_epi16(top, 4), bits));
      *hi = _mm256_or_si256(
          *hi,
          _mm256_and_si256(c % 2 ? _mm256_srli_epi16(top, 2) : _mm256_slli_epi16(top, 2), bits));
    }
  }
}

/// Products of one operand with 4 values of x in every int32 lane, as int16 pairs.
template <DType T>
inline __m256i products(__m256i w, __m256i x) {
  // q8_0: |w| (0..128, -128 included, as unsigned) times x with w's sign (|x| <= 127, so
  // negating it cannot overflow).
  if constexpr (T == DType::q8_0) return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_maddubs_epi16(w, x);
}

/// acc plus the products of one operand with 4 values of x in every int32 lane, with AVX-VNNI's
/// vpdpbusd (unsigned bytes of W times signed bytes of x, four summed into int32): the same
/// exact sums products() and the widening give, in one instruction. q8_0 as products().
template <DType T>
inline __m256i vnni_products(__m256i acc, __m256i w, __m256i x) {
  if constexpr (T == DType::q8_0) return _mm256_dpbusd_avx_epi32(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_dpbusd_avx_epi32(acc, w, x);
}

// Quads of a block a kind sums in int16 before widening (see the top of the file).
template <DType T>
constexpr int kQuadsInInt16 = T == DType::q8_0   ? 0
                              : T == DType::q6_k ? 1
                              : int8_fifth(T)    ? 2
                                                 : 4;

/// One row of x's block finished into its accumulator (8 rows of W): as int8_finish.
template <DType T, class S>
inline __m256 finish_half(const S& s, const __m256i* dot, float scale, float xsum,
                     const float* xsum16, __m256 acc) {
  constexpr float kOffset = T == DType::q4_0 ? -8.0f : T == DType::q5_0 ? -16.0f : 0.0f;
  const __m256 sc = _mm256_set1_ps(scale);
  if constexpr (T == DType::q6_k) {
    for (int h = 0; h < 2; ++h) {
      const __m256 sum =
          _mm256_fmsub_ps(_mm256_cvtepi32_ps(dot[h]), sc, _mm256_set1_ps(xsum16[h]));
      acc = _mm256_fmadd_ps(s.d16[h], sum, acc);
    }
    return acc;
  } else if constexpr (int8_minimum(T) || int8_k(T)) {
    const __m256 sum = _mm256_mul_ps(_mm256_cvtepi32_ps(dot[0]), sc);
    return _mm256_fmadd_ps(s.d, sum, _mm256_fmadd_ps(s.m, _mm256_set1_ps(xsum), acc));
  } else if constexpr (T == DType::q8_0) {
    return _mm256_fmadd_ps(s.d, _mm256_mul_ps(_mm256_cvtepi32_ps(dot[0]), sc), acc);
  } else {
    const __m256 sum =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[0]), sc, _mm256_set1_ps(kOffset * xsum));
    return _mm256_fmadd_ps(s.d, sum, acc);
  }
}

// The registers int8_pass.hpp's loop takes: each 64-byte load of the layout as two halves of
// 8 rows (its low 32 bytes the first 8 rows, its high 32 the other 8), one f32 lane a row;
// kVnni: the block sums by AVX-VNNI's vpdpbusd (only int8_avxvnni.cpp, built for it, takes it).
template <bool kVnni>
struct Avx2Lanes {
  static constexpr int64_t kRows = 8;
  static __m256 fzero() { return _mm256_setzero_ps(); }
  static __m256i broadcast(int32_t four) { return _mm256_set1_epi32(four); }
  static void store(float* y, __m256 acc) { _mm256_storeu_ps(y, acc); }
  static void prefetch(const char* at) { _mm_prefetch(at, _MM_HINT_T0); }
  static constexpr int64_t ahead(int rows) { return part_prefetch_ahead(rows); }
  template <DType T>
  using Scales = Scales8<T>;
  template <DType T>
  [[gnu::always_inline]] static void unpack(const char* quants, int c, int half, __m256i* lo, __m256i* hi) {
    unpack_half<T>(quants, c, half, lo, hi);
  }
  template <DType T, class S>
  [[gnu::always_inline]] static __m256 finish(const S& s, const __m256i* sums, float scale, float xsum, const float* xsum16, __m256 acc) {
    return finish_half<T>(s, sums, scale, xsum, xsum16, acc);
  }
  // A block's int32 sums of one half against one row of x: with AVX-VNNI vpdpbusd straight into
  // them (DotInstruction); with AVX2 the products' int16 pairs summed as far as cannot saturate
  // (kQuadsInInt16), then widened by vpmaddwd against ones.
  static __m256i izero() { return _mm256_setzero_si256(); }
  template <DType T>
  [[gnu::always_inline]] static __m256i dot(__m256i sums, __m256i w, __m256i x) { return vnni_products<T>(sums, w, x); }
  template <DType T>
  struct Avx2Dot {
    __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i part = _mm256_setzero_si256();  // int16 partial sums
    [[gnu::always_inline]] void add(__m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi, int c) {
      const int half = T == DType::q6_k ? c / 2 : 0;
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i p_lo = products<T>(lo, x_lo), p_hi = products<T>(hi, x_hi);
      constexpr int kSpan = kQuadsInInt16<T>;
      if constexpr (kSpan == 0) {
        __m256i sum = _mm256_add_epi32(sums[0], _mm256_add_epi32(_mm256_madd_epi16(p_lo, ones), _mm256_madd_epi16(p_hi, ones)));
        // Made here, as below: without it GCC kept every product of a block live until its
        // end (q8_0's 4-row pass 63 stack references a block, llvm-mca 56.1 cycles; 12, 50.2).
        asm("" : "+x"(sum));
        sums[0] = sum;
      } else {
        __m256i sum = _mm256_add_epi16(part, _mm256_add_epi16(p_lo, p_hi));
        // An empty asm that takes the sum in a register and gives it back: the sum is made here.
        // Without it GCC (its temporary expression replacement, which expands a single-use value
        // where it is used) added a block's partial sums only at the block's end, every product
        // live until then and most of them on the stack: the prefill's 4-row pass over an
        // unpacked q4_1 or q4_k group made 34 stack references a block (llvm-mca -mcpu=znver3
        // 43.0 cycles), 3 with it (33.2). On the Zen 3, the two builds alternating: 512-row
        // q4_1 and q4_k GEMMs 95-137 -> 138-157 GOP/s (bench_gemv, 12 pairs, each faster), pp512
        // Qwen2.5-Coder-1.5B 79.9-88.1 -> 86.1-102.9 t/s, Gemma 3 691-904 -> 761-1021; decode
        // unchanged within the runs' spread. Where a block's sums leave int16 after every quad
        // or two (q8_0, q6_k) nothing waits, and their loops are left as they were; q5_k's
        // one-row loop (a decode) it made slower by llvm-mca (45.7 -> 50.2 cycles a block, its
        // 4-row pass 35.0 -> 33.8), so q5_k goes without.
        if constexpr (kSpan > 1 && T != DType::q5_k) asm("" : "+x"(sum));
        part = sum;
        if ((c + 1) % kSpan == 0) {
          sums[half] = _mm256_add_epi32(sums[half], _mm256_madd_epi16(part, ones));
          part = _mm256_setzero_si256();
        }
      }
    }
  };
  template <DType T>
  using Dot = std::conditional_t<kVnni, DotInstruction<Avx2Lanes, T>, Avx2Dot<T>>;
  // Rows of x and halves of the group a pass of several rows takes (one row takes both halves):
  // 16 registers hold R accumulators, R dot products and (AVX2 alone) R int16 partial sums a
  // half beside the unpacked quants; q6_k's two dot products a row take one more each. Without
  // the partial sums AVX-VNNI fits more rows in one half: 4 rather than 3 took q6_k's 2048->640
  // at 64 rows from 1.58-1.60 to 1.39-1.40 ms, 6 rather than 5 the others' 1-2% (bench_gemv,
  // one thread).
  // AVX2 takes both halves, its accumulators partly on the stack: each broadcast of x then
  // serves two vpmaddubsw rather than one, and on a Zen 3 the broadcasts share the four vector
  // pipes with the products and the sums, which were full (llvm-mca -mcpu=znver3: a 4-row pass
  // over one half of an unpacked q4_k group 33.2 cycles for 1024 products, over both 59.1 for
  // 2048). Measured on the Zen 3, one thread, 5 pairs alternating one benchmark at a time
  // (bench_gemv BM_GEMM/.../threads:1/fast:2), against one half a pass: Qwen2.5-Coder-1.5B's
  // 512-row q4_k GEMMs 1.03-1.19x, its q6_k 1.09-1.18x, Gemma 3's 64-row q5_0, q5_1, q5_k
  // 1.13-1.24x, the encoders' q8_0 at 20 and 256 rows 1.07-1.19x, SmolLM2's shapes at 8 rows
  // 1.14-1.35x, at 2, 4 and 5 rows 1.06-1.30x; a batched decode's 8 rows faster in 7 of 7
  // rounds (bench_batch_decode). 3 rows x 2 halves (llvm-mca a little faster) measured slower
  // than 4 for every kind, and 2 x 2 slower at 8 rows (benchmarks.md); q6_k takes 3 (2 was
  // slower). AVX-VNNI keeps one half a pass (not measured: no such processor lent).
  template <DType T>
  static constexpr int kPassRows = kVnni ? (T == DType::q6_k ? 4 : 6) : (T == DType::q6_k ? 3 : 4);
  static constexpr int kPassParts = kVnni ? 1 : 2;
  // Whether a call of several passes unpacks each group once for all of them (int8_pass.hpp's
  // UnpackedGroup): every kind but q8_0 (its unpacking is a load). Measured with `bench_gemv
  // --benchmark_filter='BM_GEMM/shape:([2-9]|1[0-3])/rows:(64|512)/threads:1/fast:2'` on an
  // Emerald Rapids core held to each path, twice alternating, the copy against none: AVX2 q4_1
  // 1.07-1.28x, q4_k 1.15x, q5_0 and q5_1 1.29-1.41x, q5_k 1.39-1.55x, q6_k 1.48-1.65x;
  // AVX-VNNI q4_1 0.99-1.06x, q4_k 1.06-1.12x, q5_0 and q5_1 1.10-1.20x, q5_k 1.24-1.26x, q6_k
  // 1.30-1.33x; q8_0 1.04-1.06x and 0.97-0.99x (that with a first copy holding whole Scales;
  // the two-register KeptScales measured the same or faster).
  template <DType T>
  static constexpr bool kUnpackOnce = T != DType::q8_0;
  // q4_k's scales after its products: decoding its 6-bit scales and minimums for both halves
  // takes registers the products then need, and GCC kept them on the stack through the products
  // (the one-row loop: 33 stack references a block, 25 after; llvm-mca -mcpu=znver3 37.8 -> 35.4
  // cycles a block). On a Zen 3, cold one-thread q4_k GEMVs ran 11.4-13.9 -> 13.9-18.4 GB/s
  // (bench_gemv, Qwen2.5-Coder-1.5B's three q4_k shapes x 3 rounds, alternating). q5_k's loop
  // gained cycles the same way (45.7 -> 50.4) and q6_k's none, so they load them first. The
  // AVX-VNNI copy (fewer registers taken: no int16 partial sums) keeps its order: not measured.
  template <DType T>
  static constexpr bool kScalesAfterProducts = !kVnni && T == DType::q4_k;
};

}  // namespace
}  // namespace iron::ops::gemm
