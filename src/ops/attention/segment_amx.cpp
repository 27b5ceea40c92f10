// An encoder's attention on AMX bf16 tiles (segment_amx.hpp). TDPBF16PS multiplies a 16 x 32
// bf16 tile A by a 32 x 16 tile B held as 16 rows of (even, odd) pairs into 16 x 16 f32 sums.
// For one query head of one segment:
//   scores (16 queries x keys) = Q (16 x head_dim) . K^T: B tiles are K transposed by pairs,
//     prepared once per segment and head and read by every block of 16 queries;
//   weights = softmax of each score row, rounded to bf16: the A tiles of
//   out (16 x head_dim) = weights (16 x keys) . V: B tiles are two value rows interleaved (key
//     2i's and key 2i+1's), also prepared once.
// Keys are padded to a multiple of 32 and head_dim to one of 32 with zeros (zero weights times
// zero values), so every tile is whole.
#include "ops/attention/segment_amx.hpp"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "devices/cpu/amx.hpp"
#include "devices/cpu/simd_avx512.hpp"

namespace iron::ops::attention {

namespace {

constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Lanes [0, n) of 16 (n may be negative or past 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Which of a row's floats each 16-float part of chunk c (32 floats) reads: those below d.
struct ChunkLanes {
  __mmask16 lo[kSegmentAmxMaxDim / 32], hi[kSegmentAmxMaxDim / 32];
  explicit ChunkLanes(int64_t d) {
    for (int64_t c = 0; c < kSegmentAmxMaxDim / 32; ++c) {
      lo[c] = first_lanes(d - c * 32);
      hi[c] = first_lanes(d - c * 32 - 16);
    }
  }
};

// Chunk c of a row from p (the floats past d read as zero), times `scale`, as 32 bf16 in order.
inline __m512i bf16_32(const float* p, const ChunkLanes& lanes, int64_t c, __m512 scale) {
  const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes.lo[c], p + c * 32), scale);
  const __m512 hi = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes.hi[c], p + c * 32 + 16), scale);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// 16 floats from p (lanes outside m zero) as 16 bf16, each widened to the low half of a 32-bit lane.
inline __m512i bf16_low(const float* p, __mmask16 m) {
  return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, p)));
}

// The scratch, carved in order (every part a multiple of 64 bytes).
struct Work {
  uint16_t* kt;      // K^T pairs: B tile (key block jb of 16, head_dim chunk c of 32) at (jb * chunks + c) * 512
  uint16_t* vp;      // V pairs: row p (keys 2p, 2p + 1) of 2 D bf16; B tile (32 keys kb, 16 columns nb) at kb * 32 D + nb * 32
  uint16_t* qb;      // the block's 16 queries, scaled: 16 rows of D bf16
  float* scores;     // 16 rows of L
  uint16_t* weights; // 16 rows of L bf16
  float* out;        // 16 rows of D
  uint32_t* stage;   // a key block's pairs before transposing: 16 keys x 16 pairs per chunk
  float* sums;       // each query's sum of its weights as rounded
};

Work carve(float* base, int64_t L, int64_t D) {
  Work w;
  char* p = reinterpret_cast<char*>(base);
  auto take = [&](int64_t bytes) {
    char* at = p;
    p += round_up(bytes, 64);
    return at;
  };
  w.kt = reinterpret_cast<uint16_t*>(take(L * D * 2));
  w.vp = reinterpret_cast<uint16_t*>(take(L * D * 2));
  w.qb = reinterpret_cast<uint16_t*>(take(16 * D * 2));
  w.scores = reinterpret_cast<float*>(take(16 * L * 4));
  w.weights = reinterpret_cast<uint16_t*>(take(16 * L * 2));
  w.out = reinterpret_cast<float*>(take(16 * D * 4));
  w.stage = reinterpret_cast<uint32_t*>(take(D / 32 * 256 * 4));
  w.sums = reinterpret_cast<float*>(take(16 * 4));
  return w;
}

// K^T by pairs: B tile (jb, c)'s row i holds, for each key n of the block, the pair of
// head_dim elements (32 c + 2 i, 32 c + 2 i + 1) of key 16 jb + n. Keys at or past `keys`: zero.
void prepare_keys(const SegmentHead& s, int64_t L, int64_t D, const ChunkLanes& lanes, const Work& w) {
  const int64_t chunks = D / 32;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t jb = 0; jb < L / 16; ++jb) {
    for (int64_t n = 0; n < 16; ++n) {
      const int64_t j = jb * 16 + n;
      for (int64_t c = 0; c < chunks; ++c) {
        const __m512i pairs = j < s.keys ? bf16_32(s.k + j * s.kv_stride, lanes, c, one) : _mm512_setzero_si512();
        _mm512_store_si512(w.stage + (c * 16 + n) * 16, pairs);
      }
    }
    // Row i of the tile gathers pair i of each key: a 16 x 16 transpose of 32-bit pairs.
    const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                              _mm512_set1_epi32(16));
    for (int64_t c = 0; c < chunks; ++c) {
      auto* tile = reinterpret_cast<__m512i*>(w.kt + (jb * chunks + c) * 512);
      const uint32_t* stage = w.stage + c * 256;
      for (int i = 0; i < 16; ++i) _mm512_store_si512(tile + i, _mm512_i32gather_epi32(column, stage + i, 4));
    }
  }
}

// V by pairs: row p holds, for each column e of head_dim, (value 2p's e, value 2p + 1's e).
// Keys at or past `keys` and columns at or past d: zero.
void prepare_values(const SegmentHead& s, int64_t L, int64_t D, const ChunkLanes& lanes, const Work& w) {
  for (int64_t p = 0; p < L / 2; ++p) {
    const int64_t j = 2 * p;
    for (int64_t nb = 0; nb < D / 16; ++nb) {
      const __mmask16 m = nb % 2 ? lanes.hi[nb / 2] : lanes.lo[nb / 2];
      const __m512i even = bf16_low(s.v + j * s.kv_stride + nb * 16, j < s.keys ? m : __mmask16(0));
      const __m512i odd = bf16_low(s.v + (j + 1) * s.kv_stride + nb * 16, j + 1 < s.keys ? m : __mmask16(0));
      _mm512_store_si512(w.vp + p * 2 * D + nb * 32, _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
    }
  }
}

// Queries [r0, r0 + 16) of the head: scores, softmax, weighted values, written out.
// `keep`: per block of 16 keys, the lanes that are keys.
void query_block(const SegmentHead& s, int64_t r0, int64_t L, int64_t D, const ChunkLanes& lanes, const __mmask16* keep,
                 const Work& w) {
  const int64_t count = s.queries - r0 < 16 ? s.queries - r0 : 16, chunks = D / 32;
  const __m512 scale = _mm512_set1_ps(s.scale);
  for (int64_t n = 0; n < 16; ++n)
    for (int64_t c = 0; c < chunks; ++c)
      _mm512_store_si512(w.qb + n * D + c * 32,
                         n < count ? bf16_32(s.q + (r0 + n) * s.q_stride, lanes, c, scale) : _mm512_setzero_si512());
  // Scores, two key blocks at a time (tiles 0 and 3), the queries' chunk loaded once for both.
  const int64_t blocks = round_up(s.keys, 16) / 16;  // blocks holding a key; those past are not read
  for (int64_t jb = 0; jb < blocks; jb += 2) {
    _tile_zero(0);
    _tile_zero(3);
    for (int64_t c = 0; c < chunks; ++c) {
      _tile_loadd(1, w.qb + c * 32, D * 2);
      _tile_loadd(2, w.kt + (jb * chunks + c) * 512, 64);
      _tile_loadd(4, w.kt + ((jb + 1) * chunks + c) * 512, 64);
      _tile_dpbf16ps(0, 1, 2);
      _tile_dpbf16ps(3, 1, 4);
    }
    _tile_stored(0, w.scores + jb * 16, L * 4);
    _tile_stored(3, w.scores + (jb + 1) * 16, L * 4);
  }
  // Each row's softmax over its keys; weights past them (and rows past `count`) zero.
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  for (int64_t n = 0; n < 16; ++n) {
    uint16_t* weights = w.weights + n * L;
    if (n >= count) {
      std::memset(weights, 0, size_t(L) * 2);
      continue;
    }
    const float* row = w.scores + n * L;
    __m512 top = minus_inf;
    for (int64_t jb = 0; jb < blocks; ++jb) top = _mm512_max_ps(top, _mm512_mask_loadu_ps(minus_inf, keep[jb], row + jb * 16));
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(top));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t jb = 0; jb < L / 16; ++jb) {
      const __mmask16 m = keep[jb];
      const __m512 e = _mm512_maskz_mov_ps(m, cpu::avx512::exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + jb * 16), max)));
      const __m256i rounded = (__m256i)_mm512_cvtneps_pbh(e);
      _mm256_store_si256(reinterpret_cast<__m256i*>(weights + jb * 16), rounded);
      // The sum of the weights as rounded, so that each row's weights sum to one.
      sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(rounded), 16)));
    }
    w.sums[n] = _mm512_reduce_add_ps(sum);
  }
  // Weighted values, two 16-column blocks at a time (tiles 0 and 3), the weights loaded once for both.
  for (int64_t nb = 0; nb < D / 16; nb += 2) {
    _tile_zero(0);
    _tile_zero(3);
    for (int64_t kb = 0; kb < L / 32; ++kb) {
      _tile_loadd(1, w.weights + kb * 32, L * 2);
      _tile_loadd(2, w.vp + kb * 32 * D + nb * 32, D * 4);
      _tile_loadd(4, w.vp + kb * 32 * D + (nb + 1) * 32, D * 4);
      _tile_dpbf16ps(0, 1, 2);
      _tile_dpbf16ps(3, 1, 4);
    }
    _tile_stored(0, w.out + nb * 16, D * 4);
    _tile_stored(3, w.out + (nb + 1) * 16, D * 4);
  }
  for (int64_t n = 0; n < count; ++n) {
    const __m512 inv = _mm512_set1_ps(1.0f / w.sums[n]);
    float* y = s.y + (r0 + n) * s.q_stride;
    for (int64_t e = 0; e < s.d; e += 16) _mm512_storeu_ps(y + e, _mm512_mul_ps(_mm512_load_ps(w.out + n * D + e), inv));
  }
}

}  // namespace

int64_t segment_amx_work_floats(int64_t rows, int64_t d) {
  const int64_t L = round_up(rows, 32), D = round_up(d, 32);
  // As carve() takes it: every part a multiple of 64 bytes already but the sums.
  return (L * D * 2 * 2 + 16 * D * 2 + 16 * L * 4 + 16 * L * 2 + 16 * D * 4 + D / 32 * 256 * 4 + 64) / 4;
}

void segment_head_amx(const SegmentHead& s) {
  for (int64_t r = s.keys > 0 ? s.queries : 0; r < s.written; ++r) std::memset(s.y + r * s.q_stride, 0, size_t(s.d) * 4);
  if (s.keys <= 0 || s.queries <= 0) return;
  const int64_t L = round_up(s.keys, 32), D = round_up(s.d, 32);
  const Work w = carve(s.work, L, D);
  const ChunkLanes lanes(s.d);
  __mmask16 keep[kSegmentAmxMaxRows / 16];
  for (int64_t jb = 0; jb < L / 16; ++jb) keep[jb] = first_lanes(s.keys - jb * 16);
  prepare_keys(s, L, D, lanes, w);
  prepare_values(s, L, D, lanes, w);
  cpu::amx::configure_full_tiles();
  for (int64_t r0 = 0; r0 < s.queries; r0 += 16) query_block(s, r0, L, D, lanes, keep, w);
  // Leaves the tile state empty again, so a context switch saves none of it.
  _tile_release();
}

}  // namespace iron::ops::attention
