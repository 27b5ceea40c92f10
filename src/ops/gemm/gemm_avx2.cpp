// The matmul loops for AVX2 with FMA and F16C: 8 f32 lanes, 16 registers. The same algorithms
// as gemm_avx512.cpp: GEMV four weight rows at a time, blocks summed then scaled; tiles of
// 6 rows of a x 16 columns of packed W in 12 accumulators.
// Only intrinsics and plain loops here: no library code built for AVX2 can leak out.
#include <immintrin.h>

#include "devices/cpu/simd_avx2.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

constexpr int kNR = 16;        // columns of a packed tile
constexpr int kMR = 6;         // rows of a in one tile pass
constexpr int64_t kAhead = 8;  // GEMV prefetches the rows this many rows ahead

inline float half(const char* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline float bf16(const char* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  uint32_t bits = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

using cpu::avx2::hsum8;

template <DType T>
inline __m256 load8(const char* p) {
  if constexpr (T == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::bf16) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}
template <DType T>
inline float load1(const char* p) {
  if constexpr (T == DType::f32) {
    float f;
    __builtin_memcpy(&f, p, 4);
    return f;
  } else if constexpr (T == DType::bf16) {
    return bf16(p);
  } else {
    return half(p);
  }
}
template <DType T>
constexpr int64_t elem_bytes() {
  return T == DType::f32 ? 4 : 2;
}

inline __m256 bytes8_i8(const char* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256i bytes8_u8(const char* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// The f32 lanes of the 5-bit and K-quant loops (quant_blocks.hpp): 32 quants as four vectors of 8.
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
namespace {

// ---- GEMV ---------------------------------------------------------------------------------

template <DType T, int R>
void gemv_float(const GemvArgs& g, const char* w, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= g.k; i += 8) {
    const __m256 x = _mm256_loadu_ps(g.x + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(load8<T>(w + r * g.row_bytes + i * elem_bytes<T>()), x, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0;
    for (int64_t j = i; j < g.k; ++j)
      tail += load1<T>(w + r * g.row_bytes + j * elem_bytes<T>()) * g.x[j];
    y[r] = hsum8(acc[r]) + tail;
  }
}

template <int R>
void gemv_q8_0(const GemvArgs& g, const char* w, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t blocks = g.k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = g.x + b * 32;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
    const __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * 34;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      __m256 t = _mm256_mul_ps(bytes8_i8(blk + 2), x0);
      t = _mm256_fmadd_ps(bytes8_i8(blk + 10), x1, t);
      t = _mm256_fmadd_ps(bytes8_i8(blk + 18), x2, t);
      t = _mm256_fmadd_ps(bytes8_i8(blk + 26), x3, t);
      acc[r] = _mm256_fmadd_ps(t, _mm256_set1_ps(half(blk)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum8(acc[r]);
}

// The blocks of 32 with 4- or 5-bit quants: q4_0 / q5_0 (Q1 false: value (q - 8) d or
// (q - 16) d) and q4_1 / q5_1 (Q1 true: value q d + m); `Fifth`: 4 bytes of fifth bits (bit i:
// element i's) between the header and the nibbles.
template <bool Q1, bool Fifth>
struct Blocks32 {
  static constexpr int64_t kBytes = (Q1 ? 20 : 18) + (Fifth ? 4 : 0), kQuants = kBytes - 16;
  static constexpr float kOffset = Fifth ? -16.0f : -8.0f;  // without a minimum
  // Elements 8c .. 8c + 7 (c < 4) as 32-bit quants.
  static void quants(const char* blk, __m256i* q) {
    const __m256i low = _mm256_set1_epi32(0x0f);
    const __m256i q0 = bytes8_u8(blk + kQuants), q1 = bytes8_u8(blk + kQuants + 8);
    q[0] = _mm256_and_si256(q0, low), q[1] = _mm256_and_si256(q1, low);
    q[2] = _mm256_srli_epi32(q0, 4), q[3] = _mm256_srli_epi32(q1, 4);
    if constexpr (Fifth) {  // lane i of q[c] meets bit 8c + i, moved to bit 4
      uint32_t bits;
      __builtin_memcpy(&bits, blk + kQuants - 4, 4);
      const __m256i shifts = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
      for (int c = 0; c < 4; ++c) {
        const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(bits >> (8 * c))), shifts), one);
        q[c] = _mm256_or_si256(q[c], _mm256_slli_epi32(bit, 4));
      }
    }
  }
};

template <bool Q1, bool Fifth, int R>
void gemv_q4(const GemvArgs& g, const char* w, float* y) {
  using B = Blocks32<Q1, Fifth>;
  __m256 acc[R];
  float corr[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), corr[r] = 0;
  const int64_t blocks = g.k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = g.x + b * 32;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
    const __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
    const float xs = g.xsum[b];
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * B::kBytes;
      _mm_prefetch(blk + kAhead * g.row_bytes, _MM_HINT_T0);
      const float d = half(blk);
      const float m = Q1 ? half(blk + 2) : B::kOffset * d;
      __m256i q[4];
      B::quants(blk, q);
      __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(q[0]), x0);
      t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[1]), x1, t);
      t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[2]), x2, t);
      t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[3]), x3, t);
      acc[r] = _mm256_fmadd_ps(t, _mm256_set1_ps(d), acc[r]);
      corr[r] += m * xs;
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum8(acc[r]) + corr[r];
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
  if (with_blocks32(g.dtype, [](auto, auto) {}))  // blocks of 4 or 5 bits meet x's block sums
    for (int64_t b = 0; b < g.k / 32; ++b) {
      const float* xb = g.x + b * 32;
      const __m256 s =
          _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8)),
                        _mm256_add_ps(_mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24)));
      g.xsum[b] = hsum8(s);
    }
  int64_t r = 0;
  for (; r + 4 <= g.rows; r += 4) gemv_rows<4>(g, g.w + r * g.row_bytes, g.y + r);
  for (; r < g.rows; ++r) gemv_rows<1>(g, g.w + r * g.row_bytes, g.y + r);
}

// ---- packing ------------------------------------------------------------------------------

template <DType T>
void dequantise_float(const char* w, int64_t k, float* out) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm256_storeu_ps(out + i, load8<T>(w + i * elem_bytes<T>()));
  for (; i < k; ++i) out[i] = load1<T>(w + i * elem_bytes<T>());
}

template <bool Q1, bool Fifth>
void dequantise32(const char* w, int64_t k, float* out) {
  using B = Blocks32<Q1, Fifth>;
  for (int64_t b = 0; b < k / 32; ++b, w += B::kBytes, out += 32) {
    const float dd = half(w);
    const __m256 d = _mm256_set1_ps(dd), m = _mm256_set1_ps(Q1 ? half(w + 2) : B::kOffset * dd);
    __m256i q[4];
    B::quants(w, q);
    for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + 8 * c, _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[c]), d, m));
  }
}

void dequantise(DType t, const char* w, int64_t k, float* out) {
  if (quant_dequantise<Lanes>(t, w, k, out)) return;
  switch (t) {
    case DType::bf16:
      return dequantise_float<DType::bf16>(w, k, out);
    case DType::f16:
      return dequantise_float<DType::f16>(w, k, out);
    case DType::q8_0:
      for (int64_t b = 0; b < k / 32; ++b, w += 34, out += 32) {
        const __m256 d = _mm256_set1_ps(half(w));
        for (int j = 0; j < 4; ++j)
          _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(bytes8_i8(w + 2 + 8 * j), d));
      }
      return;
    default:
      with_blocks32(t, [&](auto q1, auto fifth) { dequantise32<q1, fifth>(w, k, out); });
      return;
  }
}

// dst[j * ld + i] = src[i][k0 + j] for i, j < 8.
void transpose8(const float* const* src, int64_t k0, float* dst, int64_t ld) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    const __m256 r0 = _mm256_loadu_ps(src[2 * i] + k0), r1 = _mm256_loadu_ps(src[2 * i + 1] + k0);
    t[2 * i] = _mm256_unpacklo_ps(r0, r1);
    t[2 * i + 1] = _mm256_unpackhi_ps(r0, r1);
  }
  for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
    __m256* tt = t + 4 * h;
    u[4 * h + 0] = _mm256_shuffle_ps(tt[0], tt[2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(tt[0], tt[2], 0xee);
    u[4 * h + 2] = _mm256_shuffle_ps(tt[1], tt[3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(tt[1], tt[3], 0xee);
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_store_ps(dst + c * ld, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    _mm256_store_ps(dst + (4 + c) * ld, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
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
  for (; k0 + 8 <= p.k; k0 += 8)
    for (int h = 0; h < kNR / 8; ++h) transpose8(src + 8 * h, k0, p.packed + k0 * kNR + 8 * h, kNR);
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
  __m256 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c0[r] = _mm256_setzero_ps(), c1[r] = _mm256_setzero_ps();
  const float* p = t.packed;
  for (int64_t kk = 0; kk < k; ++kk, p += kNR) {
    const __m256 b0 = _mm256_load_ps(p), b1 = _mm256_load_ps(p + 8);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * t.ldc, c0[r]);
    _mm256_storeu_ps(c + r * t.ldc + 8, c1[r]);
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
    default:
      return;
  }
}

const Isa kIsa{"avx2",  kNR,     &gemv,   &pack, &tile, nullptr, nullptr, nullptr, &quantise_x8_avx2,
               &gemm_int8_avx2};

}  // namespace

const Isa& avx2_isa() { return kIsa; }

}  // namespace iron::ops::gemm
