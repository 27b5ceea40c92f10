// The matmul loops that need AVX-512's own instructions (F, BW, VL, DQ with BF16 and VNNI; the
// loops every width shares are gemm_hwy.cpp's):
// bf16 tiles (Precision::medium, AVX512_BF16): W packed as bf16 pairs, vdpbf16ps into 8 rows of a
// x 32 columns of f32 sums.
// Int8 (Precision::medium, AVX512_VNNI): x quantised to int8 blocks, vpdpbusd of W's quants
// rearranged 16 rows to a load (kernels.hpp) with 4 values of x, int32 sums per block scaled in
// f32 by d_w * d_x.
// Only intrinsics and plain loops here: no library code built for AVX-512 can leak out.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "ops/gemm/int8_blocks.hpp"
#include "ops/gemm/int8_pass.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

constexpr int kNR = 32;  // columns of a packed tile (gemm_hwy.cpp's AVX-512 copy packs them)
constexpr int kMR = 8;   // rows of a in one bf16 tile pass

// ---- bf16 tiles (Precision::medium) ---------------------------------------------------------

inline __m512bh bh(__m512i v) { return (__m512bh)v; }

void pack_bf16(const PackBf16Args& p) {
  // Pairs (k even, k odd) of each column side by side: unpack, put the 128-bit lanes in column
  // order, round both halves to bf16 at once.
  const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i i1 =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const int64_t pairs = (p.k + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const float* r0 = p.packed + 2 * q * kNR;
    const bool second = 2 * q + 1 < p.k;
    for (int h = 0; h < kNR / 16; ++h) {
      const __m512 a = _mm512_load_ps(r0 + 16 * h);
      const __m512 b = second ? _mm512_load_ps(r0 + kNR + 16 * h) : _mm512_setzero_ps();
      const __m512 lo = _mm512_unpacklo_ps(a, b), hi = _mm512_unpackhi_ps(a, b);
      const __m512 e0 = _mm512_permutex2var_ps(lo, i0, hi), e1 = _mm512_permutex2var_ps(lo, i1, hi);
      _mm512_store_si512(p.out + (q * kNR + 16 * h) * 2, (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
    }
  }
}

void rows_bf16(const RowsBf16Args& r) {
  const int64_t width = (r.k + 1) / 2 * 2;
  for (int64_t m = 0; m < r.m; ++m) {
    const float* a = r.a + m * r.lda;
    uint16_t* o = r.out + m * width;
    int64_t i = 0;
    for (; i + 32 <= r.k; i += 32)
      _mm512_storeu_si512(
          o + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(a + i)));
    for (; i < width; i += 16) {
      const int64_t in = r.k - i < 16 ? r.k - i : 16, out = width - i < 16 ? width - i : 16;
      const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << in) - 1), a + i);
      _mm256_mask_storeu_epi16(o + i, __mmask16((1u << out) - 1), (__m256i)_mm512_cvtneps_pbh(v));
    }
  }
}

// Unrolled as tile_rows is, for the same reason: the accumulators in registers alone.
template <int MR>
void tile_bf16_rows(const TileBf16Args& t, const uint16_t* a, float* c) {
  const int64_t pairs = t.pairs, lda = t.lda;
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c0[r] = _mm512_setzero_ps(), c1[r] = _mm512_setzero_ps();
  const uint16_t* p = t.packed;
  for (int64_t q = 0; q < pairs; ++q, p += 2 * kNR) {
    const __m512bh b0 = bh(_mm512_load_si512(p)), b1 = bh(_mm512_load_si512(p + 32));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      __builtin_memcpy(&pair, a + r * lda + 2 * q, 4);
      const __m512bh av = bh(_mm512_set1_epi32(pair));
      c0[r] = _mm512_dpbf16_ps(c0[r], av, b0);
      c1[r] = _mm512_dpbf16_ps(c1[r], av, b1);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(c + r * t.ldc, c0[r]);
    _mm512_storeu_ps(c + r * t.ldc + 16, c1[r]);
  }
}

void tile_bf16(const TileBf16Args& t) {
  int64_t m = 0;
  for (; m + kMR <= t.m; m += kMR) tile_bf16_rows<kMR>(t, t.a + m * t.lda, t.c + m * t.ldc);
  const uint16_t* a = t.a + m * t.lda;
  float* c = t.c + m * t.ldc;
  switch (t.m - m) {
    case 1:
      return tile_bf16_rows<1>(t, a, c);
    case 2:
      return tile_bf16_rows<2>(t, a, c);
    case 3:
      return tile_bf16_rows<3>(t, a, c);
    case 4:
      return tile_bf16_rows<4>(t, a, c);
    case 5:
      return tile_bf16_rows<5>(t, a, c);
    case 6:
      return tile_bf16_rows<6>(t, a, c);
    case 7:
      return tile_bf16_rows<7>(t, a, c);
    default:
      return;
  }
}

// ---- int8 (Precision::medium, AVX512_VNNI) ---------------------------------------------

// Lane b of the result: v[b] reduced over its 16 lanes by `op` (max or an integer sum: exact
// in any order but for NaNs), all 16 at once: 45 shuffles and ops as written, where 16
// reductions of one vector each take 4 shuffles and 4 ops. Pairs first within 128-bit lanes,
// then across them.
template <class Op>
inline __m512 reduce_16(const __m512 (&v)[16], Op op) {
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i)  // lanes 4c, 4c + 2: v[2i]'s partials; 4c + 1, 4c + 3: v[2i + 1]'s
    t[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // lane 4c + j: v[4i + j]'s partial of 128-bit lane c
    u[i] = op(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; ++i)  // 128-bit lanes pairwise: u[2i]'s 0+1, 2+3, then u[2i + 1]'s
    w[i] = op(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return op(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
            _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

void quantise_x8(const QuantiseX8Args& a) {
  // Up to 16 blocks at a time, their maxima and sums reduced together, where one block at a time
  // took four horizontal reductions a block (every matmul of a batched decode step pays this
  // for each row on each thread: 4.0-4.2% of its samples then, 2.5-2.6% now, perf record of
  // bench_batch_decode ... 2 medium). Maxima of finite values and integer
  // sums are exact in any order, so each block's values are what it alone would give (a block
  // holding a NaN may differ: max passes a NaN on by its operands' order).
  auto max_op = [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); };
  auto add_op = [](__m512 x, __m512 y) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  };
  const int64_t blocks = a.k / 32;
  for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
    const int n = int(std::min<int64_t>(16, blocks - b0));
    const float* x = a.x + b0 * 32;
    __m512 m[16], s0[16], s1[16];
    for (int b = 0; b < 16; ++b)
      m[b] = b < n ? _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * b)), _mm512_abs_ps(_mm512_loadu_ps(x + 32 * b + 16)))
                   : _mm512_setzero_ps();
    const __m512 mx = reduce_16(m, max_op);
    // The reciprocal 0 for a block of zeros, or of values so small (largest |x| below 127 /
    // FLT_MAX) that it overflows, which rounds them to zeros; |q| <= 127, rounded to nearest
    // (even) by the default MXCSR mode, saturated for safety.
    const __m512 reciprocal =
        _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(127.0f), mx);
    const __m512 id = _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(reciprocal, _mm512_set1_ps(std::numeric_limits<float>::infinity()), _CMP_LT_OQ), reciprocal);
    const __m512 scale = _mm512_div_ps(mx, _mm512_set1_ps(127.0f));
    alignas(64) float ids[16];
    _mm512_store_ps(ids, id);
    for (int b = 0; b < 16; ++b) {
      if (b >= n) {
        s0[b] = s1[b] = _mm512_setzero_ps();
        continue;
      }
      const __m512 ib = _mm512_set1_ps(ids[b]);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b), ib));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16), ib));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(a.q + (b0 + b) * 32), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(a.q + (b0 + b) * 32 + 16), _mm512_cvtsepi32_epi8(q1));
      s0[b] = _mm512_castsi512_ps(q0);
      s1[b] = _mm512_castsi512_ps(q1);
    }
    // The sums of the blocks as rounded, not as given: the weights' offset term (q4_1's m, q4_0's
    // -8 d) then meets the same x as the quants do, so the error stays sum(w e), as llama.cpp's
    // q8_1 has it; the exact sum would add m * sum(e), doubling the error. Per half (xsum16,
    // block b's two side by side, 32 times each: kernels.hpp) for q6_k's half scales.
    const __m512i sum0 = _mm512_castps_si512(reduce_16(s0, add_op)), sum1 = _mm512_castps_si512(reduce_16(s1, add_op));
    const auto valid = __mmask16((1u << n) - 1);
    _mm512_mask_storeu_ps(a.scale + b0, valid, scale);
    _mm512_mask_storeu_ps(a.xsum + b0, valid, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1))));
    const __m512 times32 = _mm512_set1_ps(32.0f);  // kernels.hpp: xsum16 holds 32 times the sums
    const __m512 h0 = _mm512_mul_ps(times32, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum0)));
    const __m512 h1 = _mm512_mul_ps(times32, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum1)));
    const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i second = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const auto pairs = uint32_t((uint64_t(1) << (2 * n)) - 1);
    _mm512_mask_storeu_ps(a.xsum16 + 2 * b0, __mmask16(pairs), _mm512_permutex2var_ps(h0, first, h1));
    _mm512_mask_storeu_ps(a.xsum16 + 2 * b0 + 16, __mmask16(pairs >> 16), _mm512_permutex2var_ps(h0, second, h1));
  }
}

// The registers int8_pass.hpp's loop takes: each 64-byte load of W is one register of the
// group's 16 rows, which feeds one vpdpbusd per row of x (4 columns of the 16 rows against 4
// values of x broadcast); the block's int32 sums then meet d_w * scale (and the offset term) in
// f32 (int8_blocks.hpp, which the AMX loop shares).
struct Lanes {
  static constexpr int64_t kRows = 16;
  static __m512 fzero() { return _mm512_setzero_ps(); }
  static __m512i broadcast(int32_t four) { return _mm512_set1_epi32(four); }
  static void store(float* y, __m512 acc) { _mm512_storeu_ps(y, acc); }
  static void prefetch(const char* at) { _mm_prefetch(at, _MM_HINT_T0); }
  // Software prefetch 4 KiB ahead of the block being read, whatever the rows. The hardware
  // prefetcher alone fell behind: a batched step's pass of several rows spends ~8 times as long
  // on each block (576->1536 Q4_1, 8 rows, one thread, W cold: 73.7-85.9 -> 70.1-70.8 us a call
  // in bench_gemv's BM_GEMMCold; docs/design.md "MEDIUM on a batched step"), and a decode's one
  // row over weights larger than the cache left it behind too (Qwen2.5-Coder-1.5B, 935 MiB a
  // token, 2 threads: 70-77% of the streaming-read bound without the prefetches, 76-89% with them
  // 4 KiB ahead, 83-84% 8 KiB ahead; 1 KiB ahead, once the choice for one row, 70-76%).
  static constexpr int64_t ahead(int) { return 4096; }
  template <DType T>
  struct Scales : Int8Scales<T> {
    void load(const char* group, int64_t b, int) { Int8Scales<T>::load(group, b); }
  };
  template <DType T>
  [[gnu::always_inline]] static void unpack(const char* quants, int c, int, __m512i* lo, __m512i* hi) {
    int8_unpack<T>(quants, c, lo, hi);
  }
  template <DType T, class S>
  [[gnu::always_inline]] static __m512 finish(const S& s, const __m512i* sums, float scale, float xsum,
                                         const float* xsum16, __m512 acc) {
    return int8_finish<T>(s, sums, scale, xsum, xsum16, acc);
  }
  static __m512i izero() { return _mm512_setzero_si512(); }
  template <DType>
  [[gnu::always_inline]] static __m512i dot(__m512i sums, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(sums, w, x); }
  template <DType T>
  using Dot = DotInstruction<Lanes, T>;
  // Rows of x one pass over a group of W takes: a pass over the packed group unpacks its quants
  // (and converts its scales) again (a prefill's q6_k passes read a copy unpacked once,
  // kUnpackOnce below), and one row's eight dot products a block form one dependent chain, so a
  // batched decode step (up to 8 rows: a server's streams) is one pass with as many
  // chains as rows. q6_k's two halves take twice the accumulators (24 of the 32 registers at 8
  // rows); 8 rows rather than 4 took its 8-row calls from 135-139 to 102-103 us (2048->640) and
  // 87-89 to 69-70 us (1536->576), its 64- and 512-row calls 2-5% (bench_gemv, one thread,
  // alternating, on an Emerald Rapids core).
  template <DType T>
  static constexpr int kPassRows = 8;
  static constexpr int kPassParts = 1;
  // Whether a call of several passes unpacks each group once for all of them (int8_pass.hpp's
  // UnpackedGroup): q6_k alone, whose six bits take twice the other kinds' instructions to
  // unpack. Measured with `bench_gemv --benchmark_filter=
  // 'BM_GEMM/shape:([2-9]|1[0-3]|2[2-5])/rows:(64|512)/threads:1/fast:2'` on an Emerald Rapids
  // core, twice alternating, both with 8-row passes: q6_k 1.14-1.21x faster at 64 rows,
  // 1.05-1.12x at 512 (with 4-row passes the copy gave 1.25x); the others (with a first copy
  // that held whole Scales) the same within 3% or, q4_1 and q8_0 with k of 1536 or more and q4_k
  // with k 8960, 3-10% slower: their 8-row passes already share an unpacking among 8 rows, and
  // the copy's 640 bytes a block are more than the packed group's (q4_k 288, q8_0 544).
  template <DType T>
  static constexpr bool kUnpackOnce = T == DType::q6_k;
  template <DType T>
  static constexpr bool kScalesAfterProducts = false;  // measured only where AVX2 runs (int8_avx2_loops.hpp)
};

void gemm_int8(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { int8_groups<Lanes, decltype(kind)::value>(g); });
}

}  // namespace

// What avx512_isa() (gemm_hwy.cpp) takes from this file.
namespace avx512 {
void pack_bf16(const PackBf16Args& p) { gemm::pack_bf16(p); }
void rows_bf16(const RowsBf16Args& r) { gemm::rows_bf16(r); }
void tile_bf16(const TileBf16Args& t) { gemm::tile_bf16(t); }
void quantise_x8(const QuantiseX8Args& a) { gemm::quantise_x8(a); }
void gemm_int8(const GemmInt8Args& g) { gemm::gemm_int8(g); }
}  // namespace avx512

}  // namespace iron::ops::gemm
