// The matmul loops for AVX-512 (F, BW, VL, DQ) with FMA and F16C: 16 f32 lanes.
// GEMV: four weight rows at a time share each load of x; q8_0's blocks are converted to f32,
// summed per block, then scaled; the blocks of 4 or 5 bits index a table of their block's 16
// (32) dequantised values (weights32), and the weights meet x directly. Tiles: 8 rows of a x 32
// columns of packed W in 16 accumulators.
// Int8 (Precision::medium, AVX512_VNNI): x quantised to int8 blocks, vpdpbusd of W's quants
// rearranged 16 rows to a load (kernels.hpp) with 4 values of x, int32 sums per block scaled in
// f32 by d_w * d_x.
// Only intrinsics and plain loops here: no library code built for AVX-512 can leak out.
// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as maybe
// uninitialised (a known false positive); the placeholders are never read.
#ifndef __clang__  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "ops/gemm/int8_blocks.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

constexpr int kNR = 32;  // columns of a packed tile
constexpr int kMR = 8;   // rows of a in one tile pass
// GEMV prefetches the rows this many rows ahead (two groups of four): a single thread reading
// memory-mapped weights is otherwise bound by the latency of its misses, not the bandwidth.
constexpr int64_t kAhead = 8;

inline float half(const char* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m512 bf16x16(const void* p) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 bf16x16(const void* p, __mmask16 m) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 f16x16(const void* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}
inline __m512 f16x16(const void* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// Sixteen values of a float kind: f32, bf16 or f16 (the kind's element size is `bytes`).
template <DType T>
inline __m512 load16(const char* p) {
  if constexpr (T == DType::f32)
    return _mm512_loadu_ps(p);
  else if constexpr (T == DType::bf16)
    return bf16x16(p);
  else
    return f16x16(p);
}
template <DType T>
inline __m512 load16(const char* p, __mmask16 m) {
  if constexpr (T == DType::f32)
    return _mm512_maskz_loadu_ps(m, p);
  else if constexpr (T == DType::bf16)
    return bf16x16(p, m);
  else
    return f16x16(p, m);
}
template <DType T>
constexpr int64_t elem_bytes() {
  return T == DType::f32 ? 4 : 2;
}

// The f32 lanes of the 5-bit and K-quant loops (quant_blocks.hpp): 32 quants as two vectors of 16.
struct Lanes {
  using Acc = __m512;
  static Acc zero() { return _mm512_setzero_ps(); }
  static float sum(Acc a) { return _mm512_reduce_add_ps(a); }
  static float sum32(const float* x) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)));
  }
  static __m512 low16(__m256i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))); }
  static __m512 high16(__m256i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))); }
  template <bool Halves>
  static Acc fma32(__m256i q, const float* x, float s0, float s1, Acc acc) {
    const __m512 lo = _mm512_mul_ps(low16(q), _mm512_loadu_ps(x));
    if constexpr (!Halves) return _mm512_fmadd_ps(_mm512_fmadd_ps(high16(q), _mm512_loadu_ps(x + 16), lo), _mm512_set1_ps(s0), acc);
    acc = _mm512_fmadd_ps(lo, _mm512_set1_ps(s0), acc);
    return _mm512_fmadd_ps(_mm512_mul_ps(high16(q), _mm512_loadu_ps(x + 16)), _mm512_set1_ps(s1), acc);
  }
  template <bool>
  static void store32(__m256i q, float s0, float s1, float offset, float* out) {
    const __m512 o = _mm512_set1_ps(offset);
    _mm512_storeu_ps(out, _mm512_fmadd_ps(low16(q), _mm512_set1_ps(s0), o));
    _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(high16(q), _mm512_set1_ps(s1), o));
  }
};

}  // namespace
}  // namespace iron::ops::gemm

#include "ops/gemm/quant_blocks.hpp"

namespace iron::ops::gemm {
namespace {

// ---- GEMV ---------------------------------------------------------------------------------

template <DType T, int R>
void gemv_float(const GemvArgs& g, const char* w, float* y) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= g.k; i += 16) {
    const __m512 x = _mm512_loadu_ps(g.x + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(load16<T>(w + r * g.row_bytes + i * elem_bytes<T>()), x, acc[r]);
  }
  if (i < g.k) {
    const __mmask16 m = __mmask16((1u << (g.k - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, g.x + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(load16<T>(w + r * g.row_bytes + i * elem_bytes<T>(), m), x, acc[r]);
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

template <int R>
void gemv_q8_0(const GemvArgs& g, const char* w, float* y) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t blocks = g.k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 x0 = _mm512_loadu_ps(g.x + b * 32), x1 = _mm512_loadu_ps(g.x + b * 32 + 16);
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * 34;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      const __m512 lo = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))));
      const __m512 hi = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18))));
      const __m512 t = _mm512_fmadd_ps(hi, x1, _mm512_mul_ps(lo, x0));
      acc[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(half(blk)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

// The blocks of 32 with 4- or 5-bit quants: q4_0 / q5_0 (Q1 false: value (q - 8) d or
// (q - 16) d) and q4_1 / q5_1 (Q1 true: value q d + m); `Fifth`: 4 bytes of fifth bits (bit i:
// element i's) between the header and the nibbles.
template <bool Q1, bool Fifth>
struct Blocks32 {
  static constexpr int64_t kBytes = (Q1 ? 20 : 18) + (Fifth ? 4 : 0), kQuants = kBytes - 16;
  static constexpr float kOffset = Fifth ? -16.0f : -8.0f;  // without a minimum
  // Elements 0-15 and 16-31 as 32-bit quants.
  static void quants(const char* blk, __m512i* lo, __m512i* hi) {
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQuants)));
    *lo = _mm512_and_si512(q, _mm512_set1_epi32(0x0f));
    *hi = _mm512_srli_epi32(q, 4);
    if constexpr (Fifth) {  // lane i of lo meets bit i, lane i of hi bit 16 + i
      uint32_t bits;
      __builtin_memcpy(&bits, blk + kQuants - 4, 4);
      const __m512i sixteen = _mm512_set1_epi32(16);
      *lo = _mm512_mask_or_epi32(*lo, __mmask16(bits), *lo, sixteen);
      *hi = _mm512_mask_or_epi32(*hi, __mmask16(bits >> 16), *hi, sixteen);
    }
  }
};

// A block's 32 weights as f32, the values to_f32 gives them (d q + m, or d (q - 8) / d (q - 16)),
// from a table of the kind's 16 (32 with a fifth bit) values for this block's d and m, which
// the quants index with one permute per 16 lanes: d q is exact in f32 (an f16 d times a 4- or
// 5-bit q), so each entry is the dequantised weight rounded once, as to_f32 rounds it. This
// took the place of converting the quants to f32 and meeting m with the block's sum of x.
template <bool Q1, bool Fifth>
inline void weights32(const char* blk, __m512* lo, __m512* hi) {
  using B = Blocks32<Q1, Fifth>;
  uint32_t header = 0;
  __builtin_memcpy(&header, blk, Q1 ? 4 : 2);
  const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(int(header))));
  const __m512 d = _mm512_broadcastss_ps(_mm512_castps512_ps128(dm));
  // The quants' values: 0..15 (0..31), less 8 (16) without a minimum.
  const float first = Q1 ? 0.0f : B::kOffset;
  const __m512 values = _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                      _mm512_set1_ps(first));
  auto table = [&](__m512 v) {
    if constexpr (Q1) return _mm512_fmadd_ps(v, d, _mm512_permutexvar_ps(_mm512_set1_epi32(1), dm));
    return _mm512_mul_ps(v, d);
  };
  const __m512 t0 = table(values);
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + B::kQuants)));
  if constexpr (!Fifth) {
    // vpermps reads the low 4 bits of each lane: the low nibble as it is.
    *lo = _mm512_permutexvar_ps(q, t0);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t0);
  } else {
    const __m512 t1 = table(_mm512_add_ps(values, _mm512_set1_ps(16.0f)));
    __m512i qlo, qhi;
    B::quants(blk, &qlo, &qhi);
    *lo = _mm512_permutex2var_ps(t0, qlo, t1);
    *hi = _mm512_permutex2var_ps(t0, qhi, t1);
  }
}

// Per block and row: the block's weights (weights32) times x in 16 lanes.
template <bool Q1, bool Fifth, int R>
void gemv_q4(const GemvArgs& g, const char* w, float* y) {
  using B = Blocks32<Q1, Fifth>;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int64_t blocks = g.k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 x0 = _mm512_loadu_ps(g.x + b * 32), x1 = _mm512_loadu_ps(g.x + b * 32 + 16);
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * B::kBytes;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      __m512 lo, hi;
      weights32<Q1, Fifth>(blk, &lo, &hi);
      acc[r] = _mm512_fmadd_ps(hi, x1, _mm512_fmadd_ps(lo, x0, acc[r]));
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

template <int R>
void gemv_rows(const GemvArgs& g, const char* w, float* y) {
  switch (g.dtype) {
    case DType::f32:
      return gemv_float<DType::f32, R>(g, w, y);
    case DType::bf16:
      return gemv_float<DType::bf16, R>(g, w, y);
    case DType::f16:
      return gemv_float<DType::f16, R>(g, w, y);
    case DType::q8_0:
      return gemv_q8_0<R>(g, w, y);
    default:
      with_blocks32(g.dtype, [&](auto q1, auto fifth) { gemv_q4<q1, fifth, R>(g, w, y); });
      return;
  }
}

void gemv(const GemvArgs& g) {
  if (quant_gemv<Lanes>(g)) return;
  int64_t r = 0;
  for (; r + 4 <= g.rows; r += 4) gemv_rows<4>(g, g.w + r * g.row_bytes, g.y + r);
  for (; r < g.rows; ++r) gemv_rows<1>(g, g.w + r * g.row_bytes, g.y + r);
}

// ---- GEMV over several rows of x (a batched decode step at highest) -----------------------
// One row of W at a time: each block is loaded and converted once, then meets every row of x
// with exactly the operations gemv_float / gemv_q8_0 / gemv_q4 apply to one row, in their order,
// into that row's own accumulators (so each row's outputs are its gemv()'s, bit for bit).

template <DType T, int M>
void many_float(const GemvManyArgs& g) {
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* w = g.w + r * g.row_bytes;
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= g.k; i += 16) {
      const __m512 wv = load16<T>(w + i * elem_bytes<T>());
      for (int m = 0; m < M; ++m) acc[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(g.x + m * g.ldx + i), acc[m]);
    }
    if (i < g.k) {
      const __mmask16 mask = __mmask16((1u << (g.k - i)) - 1);
      const __m512 wv = load16<T>(w + i * elem_bytes<T>(), mask);
      for (int m = 0; m < M; ++m)
        acc[m] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mask, g.x + m * g.ldx + i), acc[m]);
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = _mm512_reduce_add_ps(acc[m]);
  }
}

template <int M>
void many_q8_0(const GemvManyArgs& g) {
  const int64_t blocks = g.k / 32;
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* row = g.w + r * g.row_bytes;
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const char* blk = row + b * 34;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      const __m512 lo = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2))));
      const __m512 hi = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18))));
      const __m512 d = _mm512_set1_ps(half(blk));
      for (int m = 0; m < M; ++m) {
        const float* x = g.x + m * g.ldx + b * 32;
        const __m512 t = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(x)));
        acc[m] = _mm512_fmadd_ps(t, d, acc[m]);
      }
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = _mm512_reduce_add_ps(acc[m]);
  }
}

template <bool Q1, bool Fifth, int M>
void many_q4(const GemvManyArgs& g) {
  using B = Blocks32<Q1, Fifth>;
  const int64_t blocks = g.k / 32;
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* row = g.w + r * g.row_bytes;
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const char* blk = row + b * B::kBytes;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      __m512 lo, hi;
      weights32<Q1, Fifth>(blk, &lo, &hi);
      for (int m = 0; m < M; ++m) {
        const float* x = g.x + m * g.ldx + b * 32;
        acc[m] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + 16), _mm512_fmadd_ps(lo, _mm512_loadu_ps(x), acc[m]));
      }
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = _mm512_reduce_add_ps(acc[m]);
  }
}

template <int M>
bool many_rows(const GemvManyArgs& g) {
  switch (g.dtype) {
    case DType::f32:
      return many_float<DType::f32, M>(g), true;
    case DType::bf16:
      return many_float<DType::bf16, M>(g), true;
    case DType::f16:
      return many_float<DType::f16, M>(g), true;
    case DType::q8_0:
      return many_q8_0<M>(g), true;
    default:
      return with_blocks32(g.dtype, [&](auto q1, auto fifth) { many_q4<q1, fifth, M>(g); });
  }
}

// The K-quants (quant_blocks.hpp) are not taken: their rows go through gemv() one at a time.
// One row is gemv()'s own call (the caller takes gemv_many for two rows or more).
bool gemv_many(const GemvManyArgs& g) {
  switch (g.m) {
    case 2:
      return many_rows<2>(g);
    case 3:
      return many_rows<3>(g);
    case 4:
      return many_rows<4>(g);
    case 5:
      return many_rows<5>(g);
    case 6:
      return many_rows<6>(g);
    case 7:
      return many_rows<7>(g);
    case 8:
      return many_rows<8>(g);
    default:
      return false;
  }
}

// ---- packing ------------------------------------------------------------------------------

template <bool Q1, bool Fifth>
void dequantise32(const char* w, int64_t k, float* out) {
  using B = Blocks32<Q1, Fifth>;
  for (int64_t b = 0; b < k / 32; ++b, w += B::kBytes, out += 32) {
    const float dd = half(w);
    const __m512 d = _mm512_set1_ps(dd), m = _mm512_set1_ps(Q1 ? half(w + 2) : B::kOffset * dd);
    __m512i lo, hi;
    B::quants(w, &lo, &hi);
    _mm512_storeu_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, m));
    _mm512_storeu_ps(out + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, m));
  }
}

// One row of W as f32.
void dequantise(DType t, const char* w, int64_t k, float* out) {
  if (quant_dequantise<Lanes>(t, w, k, out)) return;
  int64_t i = 0;
  switch (t) {
    case DType::bf16:
      for (; i + 16 <= k; i += 16) _mm512_storeu_ps(out + i, bf16x16(w + 2 * i));
      if (i < k)
        _mm512_mask_storeu_ps(out + i, __mmask16((1u << (k - i)) - 1),
                              bf16x16(w + 2 * i, __mmask16((1u << (k - i)) - 1)));
      return;
    case DType::f16:
      for (; i + 16 <= k; i += 16) _mm512_storeu_ps(out + i, f16x16(w + 2 * i));
      if (i < k)
        _mm512_mask_storeu_ps(out + i, __mmask16((1u << (k - i)) - 1),
                              f16x16(w + 2 * i, __mmask16((1u << (k - i)) - 1)));
      return;
    case DType::q8_0:
      for (int64_t b = 0; b < k / 32; ++b, w += 34, out += 32) {
        const __m512 d = _mm512_set1_ps(half(w));
        const __m512 lo = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2))));
        const __m512 hi = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 18))));
        _mm512_storeu_ps(out, _mm512_mul_ps(lo, d));
        _mm512_storeu_ps(out + 16, _mm512_mul_ps(hi, d));
      }
      return;
    default:
      with_blocks32(t, [&](auto q1, auto fifth) { dequantise32<q1, fifth>(w, k, out); });
      return;
  }
}

inline __m512 lo_pd(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
inline __m512 hi_pd(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// dst[(j) * ld + i] = src[i][k0 + j] for i, j < 16.
void transpose16(const float* const* src, int64_t k0, float* dst, int64_t ld) {
  __m512 u[4][4];  // u[g][c]: rows 4g..4g+3, in lane L column 4L + c
  for (int g = 0; g < 4; ++g) {
    const __m512 r0 = _mm512_loadu_ps(src[4 * g] + k0), r1 = _mm512_loadu_ps(src[4 * g + 1] + k0);
    const __m512 r2 = _mm512_loadu_ps(src[4 * g + 2] + k0),
                 r3 = _mm512_loadu_ps(src[4 * g + 3] + k0);
    const __m512 a = _mm512_unpacklo_ps(r0, r1), b = _mm512_unpackhi_ps(r0, r1);
    const __m512 c = _mm512_unpacklo_ps(r2, r3), d = _mm512_unpackhi_ps(r2, r3);
    u[g][0] = lo_pd(a, c);
    u[g][1] = hi_pd(a, c);
    u[g][2] = lo_pd(b, d);
    u[g][3] = hi_pd(b, d);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[0][c], u[1][c], 0x88),
                 s1 = _mm512_shuffle_f32x4(u[0][c], u[1][c], 0xdd);
    const __m512 s2 = _mm512_shuffle_f32x4(u[2][c], u[3][c], 0x88),
                 s3 = _mm512_shuffle_f32x4(u[2][c], u[3][c], 0xdd);
    _mm512_store_ps(dst + (0 + c) * ld, _mm512_shuffle_f32x4(s0, s2, 0x88));
    _mm512_store_ps(dst + (4 + c) * ld, _mm512_shuffle_f32x4(s1, s3, 0x88));
    _mm512_store_ps(dst + (8 + c) * ld, _mm512_shuffle_f32x4(s0, s2, 0xdd));
    _mm512_store_ps(dst + (12 + c) * ld, _mm512_shuffle_f32x4(s1, s3, 0xdd));
  }
}

void pack(const PackArgs& p) {
  const float* src[kNR];
  for (int j = 0; j < kNR; ++j) {
    if (j >= p.rows) {
      src[j] = p.zeros;
    } else if (p.dtype == DType::f32) {
      src[j] = reinterpret_cast<const float*>(p.w + j * p.row_bytes);
    } else {
      dequantise(p.dtype, p.w + j * p.row_bytes, p.k, p.rowbuf + j * p.k);
      src[j] = p.rowbuf + j * p.k;
    }
  }
  int64_t k0 = 0;
  for (; k0 + 16 <= p.k; k0 += 16)
    for (int h = 0; h < kNR / 16; ++h)
      transpose16(src + 16 * h, k0, p.packed + k0 * kNR + 16 * h, kNR);
  for (; k0 < p.k; ++k0)
    for (int j = 0; j < kNR; ++j) p.packed[k0 * kNR + j] = src[j][k0];
}

// ---- tiles --------------------------------------------------------------------------------

// The accumulators stay in registers only when the loops over r are unrolled before GCC splits
// the arrays into scalars: without the pragmas it kept them in registers and also stored all of
// them to the stack every step of kk, which halved the tile's speed (objdump showed the stores).
template <int MR>
void tile_rows(const TileArgs& t, const float* a, float* c) {
  const int64_t k = t.k, lda = t.lda;
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c0[r] = _mm512_setzero_ps(), c1[r] = _mm512_setzero_ps();
  const float* p = t.packed;
  for (int64_t kk = 0; kk < k; ++kk, p += kNR) {
    const __m512 b0 = _mm512_load_ps(p), b1 = _mm512_load_ps(p + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(c + r * t.ldc, c0[r]);
    _mm512_storeu_ps(c + r * t.ldc + 16, c1[r]);
  }
}

void tile(const TileArgs& t) {
  int64_t m = 0;
  for (; m + kMR <= t.m; m += kMR) tile_rows<kMR>(t, t.a + m * t.lda, t.c + m * t.ldc);
  const float* a = t.a + m * t.lda;
  float* c = t.c + m * t.ldc;
  switch (t.m - m) {
    case 1:
      return tile_rows<1>(t, a, c);
    case 2:
      return tile_rows<2>(t, a, c);
    case 3:
      return tile_rows<3>(t, a, c);
    case 4:
      return tile_rows<4>(t, a, c);
    case 5:
      return tile_rows<5>(t, a, c);
    case 6:
      return tile_rows<6>(t, a, c);
    case 7:
      return tile_rows<7>(t, a, c);
    default:
      return;
  }
}

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
    // The reciprocal 0 for a block of zeros; |q| <= 127, rounded to nearest (even) by the
    // default MXCSR mode, saturated for safety.
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(127.0f), mx);
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
    // block b's two side by side) for q6_k's half scales.
    const __m512i sum0 = _mm512_castps_si512(reduce_16(s0, add_op)), sum1 = _mm512_castps_si512(reduce_16(s1, add_op));
    const auto valid = __mmask16((1u << n) - 1);
    _mm512_mask_storeu_ps(a.scale + b0, valid, scale);
    _mm512_mask_storeu_ps(a.xsum + b0, valid, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1))));
    const __m512 h0 = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum0)), h1 = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sum1));
    const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i second = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const auto pairs = uint32_t((uint64_t(1) << (2 * n)) - 1);
    _mm512_mask_storeu_ps(a.xsum16 + 2 * b0, __mmask16(pairs), _mm512_permutex2var_ps(h0, first, h1));
    _mm512_mask_storeu_ps(a.xsum16 + 2 * b0 + 16, __mmask16(pairs >> 16), _mm512_permutex2var_ps(h0, second, h1));
  }
}

// Software prefetch distance ahead of the block being read. Below kPrefetchBelow bytes a call,
// the hardware prefetcher has not ramped up before the call ends: cold one-row GEMVs on
// SmolLM2's layer shapes (576->576, 1536->576) went from 23-30 to 27-39 GB/s with it
// (bench_gemv, 2 threads, four runs each). A long stream (the 30 MiB classifier) it slows
// instead (42-55 -> 34-38 GB/s): there the hardware is ahead already, and the prefetches only
// take load slots.
constexpr int64_t kPrefetchAhead = 1024;
constexpr int64_t kPrefetchBelow = int64_t(4) << 20;
// A pass of several rows (a batched decode step's) spends ~8 times as long on each block, so
// 1 KiB ahead is no longer ahead of the misses: 4 KiB is (576->1536 Q4_1, 8 rows, one thread,
// W cold: 73.7-85.9 -> 70.1-70.8 us a call in bench_gemv's BM_GEMMCold, beside 49-51 us with W
// in cache; 8 and 16 KiB, or into L2 only, no better: docs/design.md "MEDIUM on a batched step").
constexpr int64_t kPrefetchAheadRows = 4096;
constexpr int kPrefetchRowsFrom = 4;

// R rows of x against one group of 16 rows of W: 16 output columns per row. Per block, each
// 64-byte load of W feeds one vpdpbusd per row of x (4 columns of the 16 rows against 4 values
// of x broadcast), then the block's int32 sums meet d_w * scale (and the offset term) in f32.
template <DType T, int R, bool Prefetch>
inline void int8_group(const GemmInt8Args& g, int64_t i0, const char* group, float* y) {
  const int64_t blocks = g.k / 32;
  const int8_t* q[R];
  const float *scale[R], *xsum[R], *xsum16[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    q[r] = g.q + (i0 + r) * g.k;
    scale[r] = g.scale + (i0 + r) * blocks;
    xsum[r] = g.xsum + (i0 + r) * blocks;
    xsum16[r] = g.xsum16 + (i0 + r) * 2 * blocks;
    acc[r] = _mm512_setzero_ps();
  }
  // Four values of row r of x from column `at`, in every int32 lane.
  auto x4 = [&](int r, int64_t at) {
    int32_t v;
    __builtin_memcpy(&v, q[r] + at, 4);
    return _mm512_set1_epi32(v);
  };
  Int8Scales<T> sc;
  for (int64_t b = 0; b < blocks; ++b) {
    const char* quants = group + int8_quants_at(T, b);
    if constexpr (Prefetch) int8_prefetch<T>(quants, R >= kPrefetchRowsFrom ? kPrefetchAheadRows : kPrefetchAhead);
    sc.load(group, b);
    // q6_k sums columns 0-15 and 16-31 apart (each 16 has its own scale); the rest in dot[0].
    __m512i dot[R][2];
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i lo, hi;
      int8_unpack<T>(quants, c, &lo, &hi);
      const int half = T == DType::q6_k ? c / 2 : 0;
      for (int r = 0; r < R; ++r) {
        dot[r][half] = _mm512_dpbusd_epi32(dot[r][half], lo, x4(r, b * 32 + 8 * c));
        dot[r][half] = _mm512_dpbusd_epi32(dot[r][half], hi, x4(r, b * 32 + 8 * c + 4));
      }
    }
    for (int r = 0; r < R; ++r) acc[r] = int8_finish<T>(sc, dot[r], scale[r][b], xsum[r][b], xsum16[r] + 2 * b, acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * g.ldy, acc[r]);
}

// Rows of x one pass over a group of W takes: each pass unpacks the group's quants (and converts
// its scales) again, and one row's eight dot products a block form one dependent chain, so a
// batched decode step (up to 8 rows: a server's streams) is one pass with as many chains as
// rows. q6_k's two halves take twice the accumulators: 4 rows keep them in registers.
template <DType T>
constexpr int kInt8PassRows = T == DType::q6_k ? 4 : 8;

// Rows [i, m) of x, fewer than a full pass, in one pass of as many rows.
template <DType T, bool Prefetch, int R = kInt8PassRows<T> - 1>
void int8_group_tail(const GemmInt8Args& g, int64_t i, const char* group, float* y) {
  if constexpr (R >= 1) {
    if (g.m - i == R) return int8_group<T, R, Prefetch>(g, i, group, y + i * g.ldy);
    int8_group_tail<T, Prefetch, R - 1>(g, i, group, y);
  }
}

template <DType T, bool Prefetch>
void gemm_int8_groups(const GemmInt8Args& g) {
  const int64_t group_bytes = PackedInt8::group_bytes(g.k, T);
  constexpr int kPass = kInt8PassRows<T>;
  // Group by group, so a group of W (16 rows, a few KiB) stays in L1 while every row meets it.
  // A row's sums do not depend on the rows beside it in a pass: each has its own accumulators,
  // fed block by block in the same order.
  for (int64_t j = 0; j < g.groups; ++j) {
    const char* group = g.w + j * group_bytes;
    float* y = g.y + j * kInt8Rows;
    int64_t i = 0;
    for (; i + kPass <= g.m; i += kPass) int8_group<T, kPass, Prefetch>(g, i, group, y + i * g.ldy);
    if (i < g.m) int8_group_tail<T, Prefetch>(g, i, group, y);
  }
}

template <DType T>
void gemm_int8_all(const GemmInt8Args& g) {
  // Several rows a pass leave the hardware prefetcher behind even on a long stream.
  if (g.m >= kPrefetchRowsFrom || g.groups * PackedInt8::group_bytes(g.k, T) < kPrefetchBelow)
    gemm_int8_groups<T, true>(g);
  else
    gemm_int8_groups<T, false>(g);
}

void gemm_int8(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { gemm_int8_all<decltype(kind)::value>(g); });
}

const Isa kIsa{"avx512",   kNR,        &gemv,      &pack,        &tile,     &pack_bf16,
               &rows_bf16, &tile_bf16, &quantise_x8, &gemm_int8, &gemv_many};

}  // namespace

const Isa& avx512_isa() { return kIsa; }

}  // namespace iron::ops::gemm
