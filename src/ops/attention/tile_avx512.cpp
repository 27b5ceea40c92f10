// The Attention tile (tile.hpp) with 512-bit registers, templated over the caches' dtype and the
// vectors a row takes (C = head_dim / 16, rounded up). For each block of 16 keys: the block's key
// and value rows are converted to f32 (copied, for f32) into scratch, whole cache rows in order,
// which keeps the memory streaming (reading values piecewise as the sums wanted them ran 12-25%
// slower on cold caches); each query's 16 scores come from 16 running sums reduced together; and
// the values are added into up to four queries' accumulators at a time, held in registers.
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

// ---- the decode tile: one query row, its few query vectors per kv head ------------------------
//
// The tile above converts each block of keys and values into scratch once and reads it back for
// every query vector: right for a prefill tile's dozens, but a decode step has only the group's
// (3 for SmolLM2) per kv head, and the stores and reloads of that scratch cost more than the
// products (14.7 GB/s of f16 on one core with the caches hot in the processor's). Here each key
// and value vector is converted from the cache straight into registers and used by up to 4
// query vectors at once (17.1 GB/s; bench_attention 1 5 hot). The products and sums are the same operations in the same
// order as the tile above (scores: 16 running sums over the row's vectors in order, summed by
// the same tree; values: added key by key into each accumulator); only the factor that
// rescales a query's sums when its maximum rises is computed otherwise (decode_block).

// Elements [e, e + 32) of a q8_0 cache, e a block's first, as two vectors: the block's scale
// read and converted once for both (load16 reads it for each).
inline void q8_0_pair(const char* buffer, int64_t e, __m512& lo, __m512& hi) {
  const char* block = buffer + (e >> 5) * 34;
  uint16_t bits;
  std::memcpy(&bits, block, 2);
  const __m512 scale = _mm512_set1_ps(_cvtsh_ss(bits));
  lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)))), scale);
  hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18)))), scale);
}

// Vectors c and, where P (q8_0 rows that start whole blocks), c + 1 of the row from element e.
template <DType T, int C, bool P>
inline void load_vectors(const char* buffer, int64_t e, int c, __mmask16 last, __m512& x0, __m512& x1) {
  if constexpr (P) {
    q8_0_pair(buffer, e + c * 16, x0, x1);
  } else {
    x0 = load16<T>(buffer, e + c * 16, c == C - 1 ? last : __mmask16(0xffff));
    x1 = x0;
  }
}

// Scores of keys [j0, j0 + 16) of kv head h for B query vectors from m (rows past n repeat row
// n - 1; the caller masks them): J keys' sums at a time (B * J registers: 8 keys for up to 3
// query vectors, 4 for 4), each four summed to a quad, pairs of quads to the sixteen scores.
// Each sum adds the row's vectors in order, as the tile above does.
template <DType T, int C, int B, bool P>
inline void decode_scores(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, __mmask16 last,
                          __m512 scores[B]) {
  constexpr int W = C * 16, J = B <= 3 ? 8 : 4;
  static_assert(B <= 4, "4 query vectors at most in a pass");
  __m512 quads[B][2], pairs[B][2];  // the quads of the pair being formed; the pairs formed
  for (int group = 0; group < 16 / J; ++group) {
    int64_t e[J];  // each key's first element of kv head h
    for (int j = 0; j < J; ++j) {
      const int64_t row = j0 + group * J + j;
      e[j] = a.k0 + h * a.d + (row < j0 + n ? row : j0 + n - 1) * a.stride;
    }
    __m512 s[B][J];
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < J; ++j) s[i][j] = _mm512_setzero_ps();
    for (int c = 0; c < C; c += P ? 2 : 1)
      for (int j = 0; j < J; ++j) {
        __m512 k0, k1;
        load_vectors<T, C, P>(a.k, e[j], c, last, k0, k1);
        for (int i = 0; i < B; ++i) s[i][j] = _mm512_fmadd_ps(k0, _mm512_load_ps(a.q + (m + i) * W + c * 16), s[i][j]);
        if constexpr (P)
          for (int i = 0; i < B; ++i)
            s[i][j] = _mm512_fmadd_ps(k1, _mm512_load_ps(a.q + (m + i) * W + (c + 1) * 16), s[i][j]);
      }
    for (int i = 0; i < B; ++i)
      for (int g = 0; g < J / 4; ++g) {
        const int quad = group * (J / 4) + g;  // keys [4 quad, 4 quad + 4) of the block
        quads[i][quad % 2] = quad4(s[i] + 4 * g);
        if (quad % 2) pairs[i][quad / 2] = pair_quads(quads[i][0], quads[i][1]);
      }
  }
  for (int i = 0; i < B; ++i) scores[i] = sum_pairs(pairs[i][0], pairs[i][1]);
}

// Adds keys [j0, j0 + n) of kv head h's values, weighted by `p` (16 per query vector), into the
// accumulators of B query vectors from m: up to 16 / B of a row's vectors at a time in
// registers (an even count where P), added key by key as the tile above adds them.
template <DType T, int C, int B, bool P>
inline void decode_values(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, __mmask16 last,
                          const float* p) {
  constexpr int W = C * 16, G = (C < 16 / B ? C : 16 / B) & (P ? ~1 : ~0);
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
  for (int c0 = 0; c0 < C; c0 += G) {
    __m512 sum[B][G];
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) sum[i][c] = _mm512_load_ps(a.acc + (m + i) * W + (c0 + c) * 16);
    for (int64_t j = 0; j < n; ++j) {
      __m512 weight[B];
      for (int i = 0; i < B; ++i) weight[i] = _mm512_set1_ps(p[i * kKeyBlock + j]);
      for (int c = 0; c < G && c0 + c < C; c += P ? 2 : 1) {
        __m512 v0, v1;
        load_vectors<T, C, P>(a.v, e0 + j * a.stride, c0 + c, last, v0, v1);
        for (int i = 0; i < B; ++i) sum[i][c] = _mm512_fmadd_ps(weight[i], v0, sum[i][c]);
        if constexpr (P)
          for (int i = 0; i < B; ++i) sum[i][c + 1] = _mm512_fmadd_ps(weight[i], v1, sum[i][c + 1]);
      }
    }
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) _mm512_store_ps(a.acc + (m + i) * W + (c0 + c) * 16, sum[i][c]);
  }
}

// ---- medium's integer scores for q8_0 caches (AVX512-VNNI) ------------------------------------
//
// At medium a q8_0 key's blocks are multiplied as they are stored: each query vector is rounded
// once per tile, per 32-element block as q8_0 rounds (int8 and an f32 scale), and a block's
// product is an exact int32 sum of 32 int8 x int8 products (vpdpbusd), scaled by the two
// scales. The f32 scores took a conversion of every key element to f32 and 2 x B FMAs for it;
// this takes one vpdpbusd per 64 key bytes and query. vpdpbusd multiplies unsigned by signed
// bytes, so the key's bytes are offset by 128 (k ^ 0x80 = k + 128, unsigned) and 128 x the
// query block's sum (kept with its scale) is taken off the sum: exact, as every term is an
// integer. Rows must start whole blocks and head_dim be a multiple of 64 (two blocks fill a
// register); the values stay f32 products (scaled_weight_values).

// The f16 scales of 16 q8_0 blocks as f32: block k at byte offset[k] from `base`, one gather of
// each scale with the block's first two bytes, the scale kept. Scalar loads into a buffer read
// back as one vector stall on store forwarding (bench_attention 1 3 hot 'q8_0 2048' medium:
// SmolLM2 10.4 GB/s that way, 11.4 this).
inline __m512 q8_0_scales(const char* base, __m512i offset) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offset, base, 1)));
}

// A tile's queries rounded to q8_0 blocks, in its work space after the weights: query m's int8
// elements at `values + m * d`, its block b's scale and 128 x its sum at [m * blocks + b].
struct RoundedQueries {
  const int8_t* values;
  const float* scale;
  const int32_t* offset;
};

// The bytes the rounded queries of `all` query vectors of head_dim d take after the weights'
// 64 floats; the caller checks that the work space holds them.
constexpr int64_t rounded_query_bytes(int64_t all, int64_t d) { return 256 + all * d + all * (d / 32) * 8; }

RoundedQueries round_queries(const Tile& a) {
  const int64_t all = a.heads * a.queries, d = a.d, blocks = d / 32;
  char* base = reinterpret_cast<char*>(a.work + 64);
  int8_t* values = reinterpret_cast<int8_t*>(base);
  float* scale = reinterpret_cast<float*>(base + all * d);
  int32_t* offset = reinterpret_cast<int32_t*>(scale + all * blocks);
  for (int64_t m = 0; m < all; ++m)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* q = a.q + m * a.width + b * 32;
      const __m512 x0 = _mm512_load_ps(q), x1 = _mm512_load_ps(q + 16);
      const float top = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      // Nearest int8 of q * 127 / top (top is +-127 exactly); a block of zeros stays zeros.
      const __m512 inverse = _mm512_set1_ps(top > 0 ? 127.0f / top : 0.0f);
      const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, inverse));
      const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, inverse));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(values + m * d + b * 32), _mm512_cvtsepi32_epi8(i0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(values + m * d + b * 32 + 16), _mm512_cvtsepi32_epi8(i1));
      scale[m * blocks + b] = top / 127.0f;
      offset[m * blocks + b] = 128 * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    }
  return {values, scale, offset};
}

// The 64 bytes of blocks 2p and 2p + 1 of a row from element e (a block's first), offset to
// unsigned (+128).
inline __m512i q8_0_block_pair_unsigned(const char* buffer, int64_t e) {
  const char* block = buffer + (e >> 5) * 34;
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36));
  return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(char(0x80)));
}

// quad4 (avx512.hpp) on int32 lanes: 128-bit lane k of the result, element i, is the sum over
// lane k of x[i]; exact, as every sum here is.
inline __m512i quad4_i32(const __m512i x[4]) {
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpackhi_epi32(x[0], x[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2], x[3]), _mm512_unpackhi_epi32(x[2], x[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

// Two quads of keys (a register's lanes 0-7: block 2p, 8-15: block 2p + 1) to each block's sum:
// [block 2p of q0's 4 keys, block 2p + 1 of them, block 2p of q1's, block 2p + 1 of q1's].
inline __m512i block_pairs(__m512i q0, __m512i q1) {
  return _mm512_add_epi32(_mm512_shuffle_i32x4(q0, q1, 0x88), _mm512_shuffle_i32x4(q0, q1, 0xdd));
}

// Scores of keys [j0, j0 + 16) of kv head h for B query vectors from m, as decode_scores gives
// them but from int8 products: per pair of blocks, J keys' sums at a time in int32, reduced by
// the tree above to each key's two block sums, less the offset, times the key's and the query's
// scales, added in f32 (block by block, in order).
template <int C, int B>
inline void int8_scores(const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0, int64_t n,
                        __m512 scores[B]) {
  constexpr int J = B <= 3 ? 8 : 4, Pairs = C / 4, Blocks = C / 2;
  static_assert(B <= 4 && C % 4 == 0, "4 query vectors at most in a pass; rows of whole pairs of blocks");
  const int64_t d = a.d;
  // Every key's row (of kv head h) from its first element; rows past n repeat row n - 1.
  int64_t e[16];
  for (int j = 0; j < 16; ++j) e[j] = a.k0 + h * d + (j < n ? j0 + j : j0 + n - 1) * a.stride;
  for (int i = 0; i < B; ++i) scores[i] = _mm512_setzero_ps();
  // Each key's first block of the row, in bytes from the first key's.
  const char* first = a.k + (e[0] >> 5) * 34;
  const __m512i rows = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(int(n - 1)));
  const __m512i offset = _mm512_mullo_epi32(rows, _mm512_set1_epi32(int(a.stride / 32 * 34)));
  for (int p = 0; p < Pairs; ++p) {
    // The keys' scales of blocks 2p and 2p + 1, in key order.
    const __m512 key_scale[2] = {q8_0_scales(first + p * 68, offset), q8_0_scales(first + p * 68 + 34, offset)};
    __m512i quads[B][2], halves[B][2];  // the quads of the 8 keys being formed; the 8 keys formed
    for (int group = 0; group < 16 / J; ++group) {
      __m512i s[B][J];
      for (int i = 0; i < B; ++i)
        for (int j = 0; j < J; ++j) s[i][j] = _mm512_setzero_si512();
      for (int j = 0; j < J; ++j) {
        const __m512i k = q8_0_block_pair_unsigned(a.k, e[group * J + j] + p * 64);
        for (int i = 0; i < B; ++i)
          s[i][j] = _mm512_dpbusd_epi32(s[i][j], k, _mm512_load_si512(rq.values + (m + i) * d + p * 64));
      }
      for (int i = 0; i < B; ++i)
        for (int g = 0; g < J / 4; ++g) {
          const int quad = group * (J / 4) + g;  // keys [4 quad, 4 quad + 4) of the block
          quads[i][quad % 2] = quad4_i32(s[i] + 4 * g);
          if (quad % 2) halves[i][quad / 2] = block_pairs(quads[i][0], quads[i][1]);
        }
    }
    for (int i = 0; i < B; ++i) {
      const int64_t at = (m + i) * Blocks + 2 * p;
      // [block 2p of keys 0-15], [block 2p + 1 of them]
      const __m512i sums[2] = {_mm512_shuffle_i32x4(halves[i][0], halves[i][1], 0x88),
                               _mm512_shuffle_i32x4(halves[i][0], halves[i][1], 0xdd)};
      for (int b = 0; b < 2; ++b) {
        const __m512 exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[b], _mm512_set1_epi32(rq.offset[at + b])));
        scores[i] = _mm512_fmadd_ps(exact, _mm512_mul_ps(key_scale[b], _mm512_set1_ps(rq.scale[at + b])), scores[i]);
      }
    }
  }
}

// decode_values for q8_0 rows of whole blocks at medium: each block's scale is taken into the
// weights (16 keys' at once per query and block) rather than into every value element, so a
// value vector is its int8 elements converted, nothing more; the products round otherwise than
// highest's (weight x scale, then x element), which medium allows. Up to 16 / B of a row's
// vectors at a time in registers, an even count.
template <int C, int B>
inline void scaled_weight_values(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, const float* p) {
  constexpr int W = C * 16, Blocks = C / 2, G = (C < 16 / B ? C : 16 / B) & ~1;
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
  // Query i's weight of key j times the key's block b scale: w[(i * Blocks + b) * 16 + j].
  alignas(64) float w[B * Blocks * kKeyBlock];
  const __m512i rows = _mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(int(n - 1)));
  const __m512i offset = _mm512_mullo_epi32(rows, _mm512_set1_epi32(int(a.stride / 32 * 34)));
  for (int b = 0; b < Blocks; ++b) {
    const __m512 scale = q8_0_scales(a.v + ((e0 + b * 32) >> 5) * 34, offset);
    for (int i = 0; i < B; ++i)
      _mm512_store_ps(w + (i * Blocks + b) * kKeyBlock, _mm512_mul_ps(_mm512_load_ps(p + i * kKeyBlock), scale));
  }
  for (int c0 = 0; c0 < C; c0 += G) {
    __m512 sum[B][G];
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) sum[i][c] = _mm512_load_ps(a.acc + (m + i) * W + (c0 + c) * 16);
    for (int64_t j = 0; j < n; ++j)
      for (int c = 0; c < G && c0 + c < C; c += 2) {
        const char* block = a.v + ((e0 + j * a.stride + (c0 + c) * 16) >> 5) * 34;
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2))));
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18))));
        for (int i = 0; i < B; ++i) {
          const __m512 weight = _mm512_set1_ps(w[(i * Blocks + (c0 + c) / 2) * kKeyBlock + j]);
          sum[i][c] = _mm512_fmadd_ps(weight, lo, sum[i][c]);
          sum[i][c + 1] = _mm512_fmadd_ps(weight, hi, sum[i][c + 1]);
        }
      }
    for (int i = 0; i < B; ++i)
      for (int c = 0; c < G && c0 + c < C; ++c) _mm512_store_ps(a.acc + (m + i) * W + (c0 + c) * 16, sum[i][c]);
  }
}

// One block for B query vectors from m of kv head h: scores, the online softmax's update, the
// weighted values. The update is the tile above's but for the factor that rescales a query's
// sums when its maximum rises: one vector e^x for the B queries (the tile above calls std::exp
// for each, a tenth of this tile's time when maxima rise often), so the two differ there by
// exp16's ulps. Where I (medium, q8_0), the scores are int8_scores' from the rounded queries.
template <DType T, int C, int B, bool P, bool I>
void decode_block(const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0, int64_t n,
                  __mmask16 last, const Ahead& ahead) {
  constexpr int W = C * 16;
  __m512 scores[B];
  const int64_t half = (ahead.begin + ahead.end) / 2;
  ahead.fetch(ahead.begin, half);
  if constexpr (I)
    int8_scores<C, B>(a, rq, h, m, j0, n, scores);
  else
    decode_scores<T, C, B, P>(a, h, m, j0, n, last, scores);
  alignas(64) float top[16], shrink[16];
  __mmask16 keep[B];
  for (int i = 0; i < B; ++i) {
    const int64_t valid = smaller(n, a.limit[m + i] - j0), first = a.from[m + i] > j0 ? a.from[m + i] - j0 : 0;
    // Keys [first, valid) of the block: below `valid`, and from a sliding window's first on.
    keep[i] = valid <= first ? __mmask16(0)
                             : __mmask16((valid >= 16 ? 0xffffu : (1u << valid) - 1) & ~((1u << first) - 1));
    scores[i] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), keep[i], scores[i]);
    top[i] = keep[i] ? _mm512_reduce_max_ps(scores[i]) : -INFINITY;
  }
  const __mmask16 lanes = __mmask16((1u << B) - 1);
  const __m512 before = _mm512_maskz_loadu_ps(lanes, a.max + m), after = _mm512_maskz_loadu_ps(lanes, top);
  if (const __mmask16 rise = _mm512_mask_cmp_ps_mask(lanes, after, before, _CMP_GT_OQ)) {
    // e^(before - after): a query's first keys (before = -inf) give ~1e-38, scaling its zeros.
    _mm512_store_ps(shrink, cpu::avx512::exp16(_mm512_sub_ps(before, after)));
    for (int i = 0; i < B; ++i) {
      if (!((rise >> i) & 1)) continue;
      a.sum[m + i] *= shrink[i];
      float* acc = a.acc + (m + i) * W;
      const __m512 f = _mm512_set1_ps(shrink[i]);
      for (int c = 0; c < C; ++c) _mm512_store_ps(acc + c * 16, _mm512_mul_ps(_mm512_load_ps(acc + c * 16), f));
      a.max[m + i] = top[i];
    }
  }
  float* weights = a.work;
  for (int i = 0; i < B; ++i) {
    const __m512 e =
        _mm512_maskz_mov_ps(keep[i], cpu::avx512::exp16(_mm512_sub_ps(scores[i], _mm512_set1_ps(a.max[m + i]))));
    a.sum[m + i] += _mm512_reduce_add_ps(e);
    _mm512_store_ps(weights + i * kKeyBlock, e);
  }
  ahead.fetch(half, ahead.end);
  if constexpr (I)
    scaled_weight_values<C, B>(a, h, m, j0, n, weights);
  else
    decode_values<T, C, B, P>(a, h, m, j0, n, last, weights);
}

template <DType T, int C, bool P, bool I = false>
void decode_tile(const Tile& a) {
  const int64_t tail = a.d - int64_t(C - 1) * 16;
  const __mmask16 last = __mmask16(tail >= 16 ? 0xffff : (1u << tail) - 1);
  const int64_t per = a.queries;
  // Passes of 4 query vectors where they divide the group (Gemma 3's 4), else of at most 3, as
  // even as they go: a pass converts every key, so fewer passes convert less (passes of 2 + 2
  // ran Gemma's q8_0 at 6.0 GB/s where the tile above ran 6.9).
  const int64_t width = per % 4 == 0 ? 4 : 3, passes = (per + width - 1) / width;
  RoundedQueries rq{};
  if constexpr (I) rq = round_queries(a);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kKeyBlock) {
    const int64_t n = smaller(kKeyBlock, a.end - j0);
    // The next block's rows, whole and in order, fetched ahead of this block's reads of one kv
    // head's part of each row at a time: without it one thread read cold f16 caches at 5.9 GB/s,
    // 7.5 with it. Fetched piecewise, a share before each kv head's scores and values: two
    // threads read cold q8_0 caches at 11.3 GB/s with the whole block fetched at once at its
    // start, 13.6 this way (medium; two or four blocks ahead measured no better; bench_attention).
    const Ahead next = rows_ahead<T>(a, j0 + kKeyBlock, kKeyBlock);
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t pass = 0, m = h * per; pass < passes; ++pass) {
        const int64_t b = (per * (pass + 1)) / passes - (per * pass) / passes;
        // This kv head's share of the lines, on its first pass.
        const Ahead ahead = pass == 0 ? next.share(h, a.heads) : Ahead{};
        switch (b) {
          case 4: decode_block<T, C, 4, P, I>(a, rq, h, m, j0, n, last, ahead); break;
          case 3: decode_block<T, C, 3, P, I>(a, rq, h, m, j0, n, last, ahead); break;
          case 2: decode_block<T, C, 2, P, I>(a, rq, h, m, j0, n, last, ahead); break;
          default: decode_block<T, C, 1, P, I>(a, rq, h, m, j0, n, last, ahead); break;
        }
        m += b;
      }
  }
}

// q8_0 rows that start whole blocks (head_dim a multiple of 32, the view's offset too) read a
// block's scale once for its two vectors; others read it per vector.
template <int C>
void decode_tile_q8_0(const Tile& a) {
  if constexpr (C % 2 == 0) {
    if (a.d % 32 == 0 && a.k0 % 32 == 0 && a.v0 % 32 == 0) return decode_tile<DType::q8_0, C, true>(a);
  }
  decode_tile<DType::q8_0, C, false>(a);
}

// Medium's decode tile for q8_0 caches: integer scores (int8_scores) where the rows start whole
// blocks and the rounded queries fit the work space, else the f32 scores' tile.
template <int C>
void decode_tile_q8_0_int8(const Tile& a) {
  if constexpr (C % 4 == 0) {
    const int64_t work_bytes = 4 * work_floats(a.width, a.heads, a.queries);
    if (a.d % 64 == 0 && a.k0 % 32 == 0 && a.v0 % 32 == 0 &&
        rounded_query_bytes(a.heads * a.queries, a.d) <= work_bytes)
      return decode_tile<DType::q8_0, C, true, true>(a);
  }
  decode_tile_q8_0<C>(a);
}

template <DType T, int C>
TileFn decode_of() {
  if constexpr (T == DType::q8_0)
    return &decode_tile_q8_0<C>;
  else
    return &decode_tile<T, C, false>;
}

template <DType T>
TileFn decode_for_rows(int64_t d) {
  switch ((d + 15) / 16) {
    case 1: return decode_of<T, 1>();
    case 2: return decode_of<T, 2>();
    case 3: return decode_of<T, 3>();
    case 4: return decode_of<T, 4>();
    case 5: return decode_of<T, 5>();
    case 6: return decode_of<T, 6>();
    case 7: return decode_of<T, 7>();
    case 8: return decode_of<T, 8>();
    case 16: return decode_of<T, 16>();
    default: return nullptr;
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
  return for_cache(cache, d, 16, [&]<DType T>() { return for_rows<T>(d); });
}

TileFn avx512_decode_tile_q8_0_int8(int64_t d) {
  switch (d) {
    case 64: return &decode_tile_q8_0_int8<4>;
    case 128: return &decode_tile_q8_0_int8<8>;
    case 256: return &decode_tile_q8_0_int8<16>;
    default: return nullptr;
  }
}

TileFn avx512_decode_tile(DType cache, int64_t d) {
  return for_cache(cache, d, 16, [&]<DType T>() { return decode_for_rows<T>(d); });
}

}  // namespace iron::ops::attention
