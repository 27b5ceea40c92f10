// The Attention tile (tile.hpp) for AVX2 with FMA and F16C: 8 f32 lanes, 16 registers. The
// algorithm of tile_avx512.cpp's decode tile, for prefill tiles too: each key and value vector
// converted from the cache straight into registers and used by up to 3 query vectors at once,
// in blocks of 8 keys (one vector of scores). A prefill tile's dozens of query vectors convert
// each key once per pass of 3 rather than once in all, which costs less here than the portable
// tile's scalar conversions (AVX2-only CPUs took the portable loops before: 1.3 GB/s from f16,
// 0.4 from q8_0, on one core with hot caches).
// Only intrinsics and plain loops here: no library code built for AVX2 can leak out.
#include <immintrin.h>

#include <cstdint>

#include "devices/cpu/simd_avx2.hpp"
#include "ops/attention/tile.hpp"

namespace iron::ops::attention {

namespace {

constexpr int64_t kBlock = 8;  // keys scored together: one vector of scores

inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// Elements [e, e + 8) of a cache as f32 (e a multiple of 8, so q8_0's eight lie in one block).
template <DType T>
inline __m256 load8(const char* buffer, int64_t e) {
  if constexpr (T == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(buffer) + e);
  } else if constexpr (T == DType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buffer + e * 2)));
  } else if constexpr (T == DType::bf16) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buffer + e * 2)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  } else {
    static_assert(T == DType::q8_0);
    const char* block = buffer + (e >> 5) * 34;
    uint16_t bits;
    __builtin_memcpy(&bits, block, 2);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + (e & 31)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(bits)));
  }
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane i: the sum of the eight lanes of x[i], for four vectors (the high four lanes are the
// same sums again, unused).
inline __m128 sum4(const __m256 x[4]) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(x[0], x[1]), _mm256_hadd_ps(x[2], x[3]));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// e^x for 8 lanes at most 0 (every argument here is a score less the maximum, or one maximum
// less a larger one), to a few ulp: x = n ln2 + r, a degree-6 polynomial for e^r, 2^n built in
// the exponent bits. Lanes below -87.3 give e^-87.3 (about 1e-38), scaling sums of zeros.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_setzero_ps());
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

// Scores of keys [j0, j0 + 8) of kv head h for B query vectors from m (rows past n repeat row
// n - 1; the caller masks them): four keys' sums at a time (B * 4 registers).
template <DType T, int C, int B>
inline void scores8(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, __m256 scores[B]) {
  __m128 quarter[2][B];
  for (int half = 0; half < 2; ++half) {
    int64_t e[4];  // each key's first element of kv head h
    for (int j = 0; j < 4; ++j) {
      const int64_t row = j0 + half * 4 + j;
      e[j] = a.k0 + h * a.d + (row < j0 + n ? row : j0 + n - 1) * a.stride;
    }
    __m256 s[B][4];
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < 4; ++j) s[i][j] = _mm256_setzero_ps();
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < 4; ++j) {
        const __m256 k = load8<T>(a.k, e[j] + c * 8);
        for (int i = 0; i < B; ++i) s[i][j] = _mm256_fmadd_ps(k, _mm256_load_ps(a.q + (m + i) * a.width + c * 8), s[i][j]);
      }
    for (int i = 0; i < B; ++i) quarter[half][i] = sum4(s[i]);
  }
  for (int i = 0; i < B; ++i) scores[i] = _mm256_set_m128(quarter[1][i], quarter[0][i]);
}

// Adds keys [j0, j0 + n) of kv head h's values, weighted by `p` (kBlock per query vector), into
// the accumulators of B query vectors from m: up to 12 / B of a row's vectors at a time in
// registers, added key by key.
template <DType T, int C, int B>
inline void values8(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, const float* p) {
  constexpr int G = C < 12 / B ? C : 12 / B;
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
  for (int c0 = 0; c0 < C; c0 += G) {
    __m256 sum[B][G]{};  // (zeros: GCC cannot tell the loads below cover what is read)
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) sum[i][c] = _mm256_load_ps(a.acc + (m + i) * a.width + (c0 + c) * 8);
    for (int64_t j = 0; j < n; ++j) {
      __m256 weight[B];
      for (int i = 0; i < B; ++i) weight[i] = _mm256_broadcast_ss(p + i * kBlock + j);
      for (int c = 0; c < G && c0 + c < C; ++c) {
        const __m256 v = load8<T>(a.v, e0 + j * a.stride + (c0 + c) * 8);
        for (int i = 0; i < B; ++i) sum[i][c] = _mm256_fmadd_ps(weight[i], v, sum[i][c]);
      }
    }
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) _mm256_store_ps(a.acc + (m + i) * a.width + (c0 + c) * 8, sum[i][c]);
  }
}

// One block of up to 8 keys for B query vectors from m of kv head h: scores, the online
// softmax's update (one e^x for the B queries' rescaling), the weighted values.
template <DType T, int C, int B>
void block8(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n) {
  __m256 scores[B];
  scores8<T, C, B>(a, h, m, j0, n, scores);
  alignas(32) float before[8] = {}, top[8] = {}, shrink[8];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 keep[B];
  bool rise = false;
  for (int i = 0; i < B; ++i) {
    const int64_t valid = smaller(n, a.limit[m + i] - j0), first = a.from[m + i] > j0 ? a.from[m + i] - j0 : 0;
    // Keys [first, valid) of the block: below `valid`, and from a sliding window's first on.
    const __m256i lo = _mm256_set1_epi32(int(first < kBlock ? first : kBlock));
    const __m256i hi = _mm256_set1_epi32(int(valid > 0 ? valid : 0));
    keep[i] = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(lo, lane), _mm256_cmpgt_epi32(hi, lane)));
    scores[i] = _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), scores[i], keep[i]);
    before[i] = a.max[m + i];
    top[i] = valid > first ? hmax(scores[i]) : -__builtin_inff();
    rise = rise || top[i] > before[i];
  }
  if (rise) {
    // e^(before - after) for the queries whose maximum rises.
    _mm256_store_ps(shrink, exp8(_mm256_sub_ps(_mm256_load_ps(before), _mm256_max_ps(_mm256_load_ps(top), _mm256_load_ps(before)))));
    for (int i = 0; i < B; ++i) {
      if (!(top[i] > before[i])) continue;
      a.sum[m + i] *= shrink[i];
      float* acc = a.acc + (m + i) * a.width;
      const __m256 f = _mm256_set1_ps(shrink[i]);
      for (int c = 0; c < C; ++c) _mm256_store_ps(acc + c * 8, _mm256_mul_ps(_mm256_load_ps(acc + c * 8), f));
      a.max[m + i] = top[i];
    }
  }
  float* weights = a.work;
  for (int i = 0; i < B; ++i) {
    const __m256 e = _mm256_and_ps(keep[i], exp8(_mm256_sub_ps(scores[i], _mm256_set1_ps(a.max[m + i]))));
    a.sum[m + i] += cpu::avx2::hsum8(e);
    _mm256_store_ps(weights + i * kBlock, e);
  }
  values8<T, C, B>(a, h, m, j0, n, weights);
}

template <DType T, int C>
void tile(const Tile& a) {
  const int64_t per = a.queries;
  // Passes of at most 3 query vectors, as even as they go.
  const int64_t passes = (per + 2) / 3;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kBlock) {
    const int64_t n = smaller(kBlock, a.end - j0);
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t pass = 0, m = h * per; pass < passes; ++pass) {
        const int64_t b = (per * (pass + 1)) / passes - (per * pass) / passes;
        switch (b) {
          case 3: block8<T, C, 3>(a, h, m, j0, n); break;
          case 2: block8<T, C, 2>(a, h, m, j0, n); break;
          default: block8<T, C, 1>(a, h, m, j0, n); break;
        }
        m += b;
      }
  }
}

template <DType T>
TileFn for_rows(int64_t d) {
  if (d % 8) return nullptr;
  switch (d / 8) {
    case 1: return &tile<T, 1>;
    case 2: return &tile<T, 2>;
    case 3: return &tile<T, 3>;
    case 4: return &tile<T, 4>;
    case 5: return &tile<T, 5>;
    case 6: return &tile<T, 6>;
    case 7: return &tile<T, 7>;
    case 8: return &tile<T, 8>;
    case 9: return &tile<T, 9>;
    case 10: return &tile<T, 10>;
    case 12: return &tile<T, 12>;
    case 16: return &tile<T, 16>;
    case 32: return &tile<T, 32>;
    default: return nullptr;
  }
}

}  // namespace

// Called only where the CPU has the instructions this file is compiled for.
TileFn avx2_tile(DType cache, int64_t d) {
  return for_cache(cache, d, 1, [&]<DType T>() { return for_rows<T>(d); });
}

}  // namespace iron::ops::attention
