// A tile of query vectors attending to a range of keys: the loop the Attention kernel runs. The
// query vectors are every head of one query row (decode) or of a few (prefill), so each key and
// value row is read once for the whole tile rather than once per query head, and a block of keys
// is whole cache rows, read in order (one kv head's part of each row alone is a strided read,
// which the hardware's prefetchers turn into reading every row whole, three times over for three
// kv heads). An online softmax over blocks of 16 keys: each query keeps a running maximum, the
// sum of its weights and the weighted sum of values, all relative to e^max, so a tile can stop
// at any key and a later one (or a combine of several) can carry on from its state.
// AVX-512 tiles and Highway ones (AVX2, AVX-512, NEON) for f32, f16, bf16 and q8_0 caches, beside
// a portable one for any of them.
#pragma once

#include <cstdint>

#include "iron/dtype.hpp"

namespace iron::cpu {
struct Features;
}

namespace iron::ops::attention {

/// Keys scored together: one vector of scores.
constexpr int64_t kKeyBlock = 16;

struct Tile {
  // heads * queries query vectors, already scaled, `width` floats apart: the first kv head's
  // `queries`, then the next kv head's.
  const float* q;
  int64_t heads;           // kv heads, side by side in the caches (the first is at k0, v0)
  int64_t queries;         // query vectors per kv head
  const char *k, *v;       // the caches' buffers
  int64_t k0, v0;          // the element of key (value) 0 of the first kv head, from the buffer's start
  int64_t stride;          // elements from one key (value) row to the next
  int64_t d;               // head_dim: the next kv head's key starts d elements on
  int64_t width;           // d rounded up to 16: the floats of a query, an accumulator, a key row
  int64_t begin, end;      // the keys [begin, end) this tile reads
  const int64_t* limit;    // per query: it attends to keys below limit[i] (none if <= begin)
  const int64_t* from;     // per query: and from key from[i] on (a sliding window's first key)
  // Per query, in and out: the running maximum (-inf before any key), the sum of weights and
  // the weighted sum of values (`width` floats, zero past d).
  float *max, *sum, *acc;
  float* work;             // scratch of work_floats(width, heads, queries) floats, 64-byte aligned
};

/// The byte of a cache of dtype T that holds element e (q8_0: its block's first byte).
template <DType T>
constexpr int64_t byte_of(int64_t e) {
  if constexpr (T == DType::f32) return e * 4;
  if constexpr (T == DType::q8_0) return e / 32 * 34;
  return e * 2;
}

/// Cache lines of a decode tile's next block of keys and values to prefetch: lines [begin, end)
/// of its rows' bytes from k and from v (none where k is null). Each kv head's pass fetches its
/// share, half before its scores and half before its values: reading one kv head's part of each
/// row at a time, the hardware prefetcher falls behind, and all of a block's lines fetched at
/// its start read no faster (tile_avx512.cpp's and tile_hwy.cpp's decode loops say how much).
struct Ahead {
  const char *k = nullptr, *v = nullptr;
  int64_t begin = 0, end = 0;
  void fetch(int64_t from, int64_t to) const {
    if (!k) return;
    for (int64_t line = from; line < to; ++line) {
      __builtin_prefetch(k + line * 64);
      __builtin_prefetch(v + line * 64);
    }
  }
  /// Kv head h's share (of `heads`) of these lines.
  Ahead share(int64_t h, int64_t heads) const {
    return {k, v, begin + (end - begin) * h / heads, begin + (end - begin) * (h + 1) / heads};
  }
};

/// The whole cache rows [at, at + keys) of a tile's keys and values, cut at its end (none where
/// `at` is past it): what a decode loop prefetches for its next block.
template <DType T>
Ahead rows_ahead(const Tile& t, int64_t at, int64_t keys) {
  if (at >= t.end) return {};
  const int64_t count = t.end - at < keys ? t.end - at : keys;
  return {t.k + byte_of<T>(t.k0 + at * t.stride), t.v + byte_of<T>(t.v0 + at * t.stride), 0,
          (byte_of<T>(count * t.stride) + 63) / 64};
}

/// The floats of scratch a tile needs.
inline int64_t work_floats(int64_t width, int64_t heads, int64_t queries) {
  return kKeyBlock * heads * (2 * width + queries) + width;
}

using TileFn = void (*)(const Tile&);

/// The vector tiles' cache types (f32, f16, bf16, q8_0), each to `make`'s instance for it
/// (`make.template operator()<T>()`); nullptr for another type. `q8_needs` > 1: a q8_0 cache
/// takes the vector tile only where d is a multiple of it (whole blocks a vector).
template <class Make>
TileFn for_cache(DType cache, int64_t d, int64_t q8_needs, Make make) {
  switch (cache) {
    case DType::f32: return make.template operator()<DType::f32>();
    case DType::f16: return make.template operator()<DType::f16>();
    case DType::bf16: return make.template operator()<DType::bf16>();
    case DType::q8_0: return d % q8_needs ? nullptr : make.template operator()<DType::q8_0>();
    default: return nullptr;
  }
}

/// The AVX-512 tile for caches of `cache` dtype (keys and values alike) and head_dim `d`;
/// nullptr where there is none (d above 128 other than 256, q8_0 with d not a multiple of 16).
/// The CPU must have AVX-512 F, BW and VL and F16C.
TileFn avx512_tile(DType cache, int64_t d);

/// The AVX-512 tile for one query row (decode), where `queries` is the group's few: each key and
/// value vector converted straight into registers and used by up to 4 query vectors at once.
/// avx512_tile's products and sums in its order; nullptr where that has none.
TileFn avx512_decode_tile(DType cache, int64_t d);

/// medium's AVX-512 decode tile for q8_0 caches (keys and values): avx512_decode_tile's, but each
/// query rounded to q8_0 blocks once per tile and its products with the keys' blocks exact int32
/// sums (AVX512-VNNI), scaled by both blocks' scales; the values f32 products, each key's block
/// scales taken into its weights.
/// For head_dim 64, 128 and 256 (nullptr otherwise); a tile whose rows do not start whole
/// blocks takes avx512_decode_tile's. The CPU must have AVX512-VNNI too.
TileFn avx512_decode_tile_q8_0_int8(int64_t d);

/// The tile written once with Highway (tile_hwy.cpp), for prefill and decode alike: the widest
/// copy `f` runs (AVX-512, AVX2 with FMA and F16C, NEON) whose vectors divide head_dim `d`;
/// nullptr where there is none.
TileFn vector_tile(const cpu::Features& f, DType cache, int64_t d);

/// The portable tile: any of f32, f16, bf16 and q8_0 for keys and for values.
void portable_tile(DType k, DType v, const Tile& t);


/// Elements [e, e + n) of a cache of dtype `t` (f32, f16, bf16 or q8_0: q8_0 from any element,
/// not only a block's first) as f32.
void load(DType t, const char* buffer, int64_t e, int64_t n, float* out);

}  // namespace iron::ops::attention
