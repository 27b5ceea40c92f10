// Medium's integer scores for q8_0 caches with AVX512-VNNI (int8_scores.hpp): the one part of the
// Attention tile left in intrinsics, as Highway 1.0.3 has no int8 dot product. The f32 scores
// took a conversion of every key element to f32 and 2 x B FMAs for it; this takes one vpdpbusd
// per 64 key bytes and query. vpdpbusd multiplies unsigned by signed bytes, so the key's bytes
// are offset by 128 (k ^ 0x80 = k + 128, unsigned) and 128 x the query block's sum (kept with its
// scale) is taken off the sum: exact, as every term is an integer. Rows must start whole blocks
// and head_dim be a multiple of 64 (two blocks fill a register).
// Only intrinsics and plain loops here: no library code built for AVX-512 can leak out.
// GCC 12 warns of uninitialised values inside its own AVX-512 headers (their reductions): false.
#ifndef __clang__  // a GCC warning; clang has no such group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>

#include "ops/attention/int8_scores.hpp"

namespace iron::ops::attention {

namespace {

// The f16 scales of 16 q8_0 blocks as f32: block k at byte offset[k] from `base`, one gather of
// each scale with the block's first two bytes, the scale kept. Scalar loads into a buffer read
// back as one vector stall on store forwarding (bench_attention 1 3 hot 'q8_0 2048' medium:
// SmolLM2 10.4 GB/s that way, 11.4 this).
inline __m512 q8_0_scales(const char* base, __m512i offset) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offset, base, 1)));
}

// The 64 bytes of blocks 2p and 2p + 1 of a row from element e (a block's first), offset to
// unsigned (+128).
inline __m512i q8_0_block_pair_unsigned(const char* buffer, int64_t e) {
  const char* block = buffer + (e >> 5) * 34;
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36));
  return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(char(0x80)));
}

// 128-bit lane k of the result, element i, is the sum over lane k of x[i] (the f32 tile's
// quad4 on int32 lanes); exact, as every sum here is.
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

// Per pair of blocks, J keys' sums at a time in int32, reduced by the tree above to each key's
// two block sums, less the offset, times the key's and the query's scales, added in f32 (block
// by block, in order).
template <int C, int B>
void scores_of(const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0, int64_t n, float* out) {
  constexpr int J = B <= 3 ? 8 : 4, Pairs = C / 4, Blocks = C / 2;
  static_assert(B <= 4 && C % 4 == 0, "4 query vectors at most in a pass; rows of whole pairs of blocks");
  const int64_t d = a.d;
  // Every key's row (of kv head h) from its first element; rows past n repeat row n - 1.
  int64_t e[16];
  for (int j = 0; j < 16; ++j) e[j] = a.k0 + h * d + (j < n ? j0 + j : j0 + n - 1) * a.stride;
  __m512 scores[B];
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
  for (int i = 0; i < B; ++i) _mm512_storeu_ps(out + i * 16, scores[i]);
}

template <int C>
void scores_for(int queries, const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0, int64_t n,
                float* out) {
  switch (queries) {
    case 4: return scores_of<C, 4>(a, rq, h, m, j0, n, out);
    case 3: return scores_of<C, 3>(a, rq, h, m, j0, n, out);
    case 2: return scores_of<C, 2>(a, rq, h, m, j0, n, out);
    default: return scores_of<C, 1>(a, rq, h, m, j0, n, out);
  }
}

}  // namespace

// Called only where the CPU has the instructions this file is compiled for.
RoundedQueries round_queries_avx512(const Tile& a) {
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

void int8_scores_avx512(int queries, const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0,
                        int64_t n, float* scores) {
  switch (a.d) {
    case 64: return scores_for<4>(queries, a, rq, h, m, j0, n, scores);
    case 128: return scores_for<8>(queries, a, rq, h, m, j0, n, scores);
    default: return scores_for<16>(queries, a, rq, h, m, j0, n, scores);
  }
}

}  // namespace iron::ops::attention
