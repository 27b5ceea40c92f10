// The Attention tile (tile.hpp) with 512-bit registers, templated over the caches' dtype and the
// vectors a row takes (C = head_dim / 16, rounded up). For each block of 16 keys: each key row is
// converted to f32 once (copied, for f32), each query's 16 scores come from 16 running sums
// reduced together, and each value row is converted once per four queries, whose accumulators
// stay in registers over the block.
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

// Adds a block's n values (of the kv head whose value 0 is element v0), weighted, into the
// accumulators of B queries: `p` holds each query's 16 weights (kKeyBlock apart), `acc` its
// accumulator (`W` floats apart). The accumulators of up
// to 16 / B vectors of the row at a time stay in registers over the block: enough independent
// sums that the FMAs never wait on each other.
template <DType T, int C, int B>
void add_values(const Tile& a, int64_t v0, int64_t j0, int64_t n, const float* p, float* acc, __mmask16 last) {
  constexpr int W = C * 16, G = C < 16 / B ? C : 16 / B;
  for (int c0 = 0; c0 < C; c0 += G) {
    __m512 sum[B][G];
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) sum[i][c] = _mm512_load_ps(acc + i * W + (c0 + c) * 16);
    for (int64_t j = 0; j < n; ++j) {
      const char* row = a.v;
      const int64_t e = v0 + (j0 + j) * a.stride + c0 * 16;
      for (int c = 0; c < G && c0 + c < C; ++c) {
        const __m512 v = load16<T>(row, e + c * 16, c0 + c == C - 1 ? last : __mmask16(0xffff));
        for (int i = 0; i < B; ++i) sum[i][c] = _mm512_fmadd_ps(_mm512_set1_ps(p[i * kKeyBlock + j]), v, sum[i][c]);
      }
    }
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) _mm512_store_ps(acc + i * W + (c0 + c) * 16, sum[i][c]);
  }
}

template <DType T, int C>
void tile(const Tile& a) {
  constexpr int W = C * 16;
  const int64_t tail = a.d - int64_t(C - 1) * 16;
  const __mmask16 last = __mmask16(tail >= 16 ? 0xffff : (1u << tail) - 1);
  const int64_t per = a.queries, all = a.heads * per;
  float* keys = a.work;                               // the block's keys as f32, kv head by kv head
  float* weights = a.work + kKeyBlock * W * a.heads;  // each query's 16 weights
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kKeyBlock) {
    const int64_t n = smaller(kKeyBlock, a.end - j0);
    // Key j of kv head h at keys + (h * 16 + j) * W (past n, key n - 1 again: scored, then
    // masked off), so that scoring addresses each at a constant offset. A key's kv heads lie
    // side by side: the block reads whole cache rows, in order.
    for (int64_t j = 0; j < kKeyBlock; ++j) {
      const int64_t e = a.k0 + (j0 + (j < n ? j : n - 1)) * a.stride;
      for (int64_t h = 0; h < a.heads; ++h)
        for (int c = 0; c < C; ++c)
          _mm512_store_ps(keys + (h * kKeyBlock + j) * W + c * 16,
                          load16<T>(a.k, e + h * a.d + c * 16, c == C - 1 ? last : __mmask16(0xffff)));
    }
    for (int64_t m = 0; m < all; ++m) {
      float* p = weights + m * kKeyBlock;
      const int64_t valid = smaller(n, a.limit[m] - j0);
      if (valid <= 0) {
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
      const __mmask16 keep = __mmask16(valid >= 16 ? 0xffff : (1u << valid) - 1);
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
      const int64_t v0 = a.v0 + h * a.d, first = h * per, end = first + per;
      int64_t m = first;
      for (; m + 4 <= end; m += 4) add_values<T, C, 4>(a, v0, j0, n, weights + m * kKeyBlock, a.acc + m * W, last);
      switch (end - m) {
        case 3: add_values<T, C, 3>(a, v0, j0, n, weights + m * kKeyBlock, a.acc + m * W, last); break;
        case 2: add_values<T, C, 2>(a, v0, j0, n, weights + m * kKeyBlock, a.acc + m * W, last); break;
        case 1: add_values<T, C, 1>(a, v0, j0, n, weights + m * kKeyBlock, a.acc + m * W, last); break;
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
