// The Attention tile (tile.hpp) with 512-bit registers, templated over the caches' dtype and the
// vectors a row takes (C = head_dim / 16, rounded up). For each block of 16 keys: the block's key
// and value rows are converted to f32 (copied, for f32) into scratch, whole cache rows in order,
// which keeps the memory streaming (reading values piecewise as the sums wanted them ran 12-25%
// slower on cold caches); each query's 16 scores come from 16 running sums reduced together; and
// the values are added into up to four queries' accumulators at a time, held in registers.
// GCC 12 warns of uninitialised values inside its own AVX-512 headers (masked loads): false.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "devices/cpu/simd_avx512.hpp"
#include "ops/attention/avx512.hpp"
#include "ops/attention/tile.hpp"

namespace iron::ops::attention {

namespace {

// Elements [e, e + 16) of a cache as f32, lanes outside `m` zero. For q8_0 the 16 lie in one
// block (e is a multiple of 16) and `m` is full.
template <DType T>
inline __m512 load16(const char* buffer, int64_t e, __mmask16 m) {
  if constexpr (T == DType::f32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(buffer) + e);
  } else if constexpr (T == DType::f16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(buffer) + e));
  } else if constexpr (T == DType::bf16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(buffer) + e);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    static_assert(T == DType::q8_0);
    const char* block = buffer + (e >> 5) * 34;
    uint16_t scale;
    std::memcpy(&scale, block, 2);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + (e & 31)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(_cvtsh_ss(scale)));
  }
}

// Adds a block's n values (f32, W floats apart), weighted, into the accumulators of B queries:
// `p` holds each query's 16 weights (kKeyBlock apart), `acc` its accumulator (`W` floats apart).
// The accumulators of up to 16 / B vectors of the row at a time stay in registers over the
// block: enough independent sums that the FMAs never wait on each other.
template <int C, int B>
void add_values(const float* values, int64_t n, const float* p, float* acc) {
  constexpr int W = C * 16, G = C < 16 / B ? C : 16 / B;
  for (int c0 = 0; c0 < C; c0 += G) {
    __m512 sum[B][G];
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) sum[i][c] = _mm512_load_ps(acc + i * W + (c0 + c) * 16);
    for (int64_t j = 0; j < n; ++j)
      for (int c = 0; c < G && c0 + c < C; ++c) {
        const __m512 v = _mm512_load_ps(values + j * W + (c0 + c) * 16);
        for (int i = 0; i < B; ++i) sum[i][c] = _mm512_fmadd_ps(_mm512_set1_ps(p[i * kKeyBlock + j]), v, sum[i][c]);
      }
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) _mm512_store_ps(acc + i * W + (c0 + c) * 16, sum[i][c]);
  }
}

// Rows [j0, j0 + n) of a cache (every kv head of each, from element e0 of row 0) as f32: row j's
// kv head h at out + (h * 16 + j) * W; rows past n repeat row n - 1. Whole cache rows, in order.
template <DType T, int C>
void convert(const char* buffer, int64_t e0, int64_t stride, int64_t heads, int64_t d, int64_t j0, int64_t n,
             __mmask16 last, float* out) {
  constexpr int W = C * 16;
  for (int64_t j = 0; j < kKeyBlock; ++j) {
    const int64_t e = e0 + (j0 + (j < n ? j : n - 1)) * stride;
    for (int64_t h = 0; h < heads; ++h)
      for (int c = 0; c < C; ++c)
        _mm512_store_ps(out + (h * kKeyBlock + j) * W + c * 16,
                        load16<T>(buffer, e + h * d + c * 16, c == C - 1 ? last : __mmask16(0xffff)));
  }
}

template <DType T, int C>
void tile(const Tile& a) {
  constexpr int W = C * 16;
  const int64_t tail = a.d - int64_t(C - 1) * 16;
  const __mmask16 last = __mmask16(tail >= 16 ? 0xffff : (1u << tail) - 1);
  const int64_t per = a.queries, all = a.heads * per;
  // The block's keys and values as f32, kv head by kv head (scoring addresses each at a
  // constant offset), and each query's 16 weights.
  float* keys = a.work;
  float* values = keys + kKeyBlock * W * a.heads;
  float* weights = values + kKeyBlock * W * a.heads;
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kKeyBlock) {
    const int64_t n = smaller(kKeyBlock, a.end - j0);
    convert<T, C>(a.k, a.k0, a.stride, a.heads, a.d, j0, n, last, keys);
    convert<T, C>(a.v, a.v0, a.stride, a.heads, a.d, j0, n, last, values);
    for (int64_t m = 0; m < all; ++m) {
      float* p = weights + m * kKeyBlock;
      const int64_t valid = smaller(n, a.limit[m] - j0), first = a.from[m] > j0 ? a.from[m] - j0 : 0;
      if (valid <= first) {
        _mm512_store_ps(p, _mm512_setzero_ps());
        continue;
      }
      const float* q = a.q + m * W;
      const float* k = keys + m / per * kKeyBlock * W;
      __m512 s[kKeyBlock];
      for (auto& x : s) x = _mm512_setzero_ps();
      for (int c = 0; c < C; ++c) {
        const __m512 qc = _mm512_load_ps(q + c * 16);
        for (int j = 0; j < kKeyBlock; ++j) s[j] = _mm512_fmadd_ps(_mm512_load_ps(k + j * W + c * 16), qc, s[j]);
      }
      // Keys [first, valid) of the block: below `valid`, and from a sliding window's first on.
      const __mmask16 keep = __mmask16((valid >= 16 ? 0xffffu : (1u << valid) - 1) & ~((1u << first) - 1));
      const __m512 scores = _mm512_mask_mov_ps(minus_inf, keep, sum_each(s));
      const float top = _mm512_reduce_max_ps(scores);
      if (top > a.max[m]) {  // rescale what came before to the new maximum
        const float shrink = std::exp(a.max[m] - top);
        a.sum[m] *= shrink;
        float* acc = a.acc + m * W;
        for (int c = 0; c < C; ++c) _mm512_store_ps(acc + c * 16, _mm512_mul_ps(_mm512_load_ps(acc + c * 16), _mm512_set1_ps(shrink)));
        a.max[m] = top;
      }
      const __m512 e = _mm512_maskz_mov_ps(keep, cpu::avx512::exp16(_mm512_sub_ps(scores, _mm512_set1_ps(a.max[m]))));
      a.sum[m] += _mm512_reduce_add_ps(e);
      _mm512_store_ps(p, e);
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      const float* v = values + h * kKeyBlock * W;
      const int64_t end = (h + 1) * per;
      int64_t m = h * per;
      for (; m + 4 <= end; m += 4) add_values<C, 4>(v, n, weights + m * kKeyBlock, a.acc + m * W);
      switch (end - m) {
        case 3: add_values<C, 3>(v, n, weights + m * kKeyBlock, a.acc + m * W); break;
        case 2: add_values<C, 2>(v, n, weights + m * kKeyBlock, a.acc + m * W); break;
        case 1: add_values<C, 1>(v, n, weights + m * kKeyBlock, a.acc + m * W); break;
        default: break;
      }
    }
  }
}

template <DType T>
TileFn for_rows(int64_t d) {
  switch ((d + 15) / 16) {
    case 1: return &tile<T, 1>;
    case 2: return &tile<T, 2>;
    case 3: return &tile<T, 3>;
    case 4: return &tile<T, 4>;
    case 5: return &tile<T, 5>;
    case 6: return &tile<T, 6>;
    case 7: return &tile<T, 7>;
    case 8: return &tile<T, 8>;
    case 16: return &tile<T, 16>;
    default: return nullptr;
  }
}

}  // namespace

// Called only where the CPU has the instructions this file is compiled for.
TileFn avx512_tile(DType cache, int64_t d) {
  switch (cache) {
    case DType::f32: return for_rows<DType::f32>(d);
    case DType::f16: return for_rows<DType::f16>(d);
    case DType::bf16: return for_rows<DType::bf16>(d);
    case DType::q8_0: return d % 16 ? nullptr : for_rows<DType::q8_0>(d);
    default: return nullptr;
  }
}

}  // namespace iron::ops::attention
