// Medium's integer scores for the Attention decode tile over q8_0 caches (tile_hwy.cpp), with
// AVX512-VNNI (int8_scores_avx512.cpp). The rest of the tile is written once with Highway; this
// piece stays per instruction set because Highway 1.0.3 has no int8 dot product (vpdpbusd), and
// the f32 scores it replaces run at about three quarters of its speed (design.md, "Attention
// reads a cache row once per tile"). Built for x86-64 alone; only the tile's AVX-512 copy calls it.
//
// At medium a q8_0 key's blocks are multiplied as they are stored: each query vector is rounded
// once per tile, per 32-element block as q8_0 rounds (int8 and an f32 scale), and a block's
// product is an exact int32 sum of 32 int8 x int8 products, scaled by the two scales.
#pragma once

#include <cstdint>

#include "ops/attention/tile.hpp"

namespace iron::ops::attention {

/// A tile's queries rounded to q8_0 blocks, in its work space after the weights: query m's int8
/// elements at `values + m * d`, its block b's scale and 128 x its sum at [m * blocks + b].
struct RoundedQueries {
  const int8_t* values;
  const float* scale;
  const int32_t* offset;
};

/// The bytes the rounded queries of `all` query vectors of head_dim d take after the weights'
/// 64 floats; the caller checks that the work space holds them.
constexpr int64_t rounded_query_bytes(int64_t all, int64_t d) { return 256 + all * d + all * (d / 32) * 8; }

/// Rounds the tile's queries (head_dim 64, 128 or 256) into its work space.
RoundedQueries round_queries_avx512(const Tile& a);

/// The scores of keys [j0, j0 + 16) of kv head h for `queries` (1 to 4) query vectors from m, as
/// the f32 decode tile gives them but from int8 products: `scores` gets 16 a query (rows past n
/// repeat row n - 1; the caller masks them). For head_dim 64, 128 and 256 whose rows start whole
/// blocks.
void int8_scores_avx512(int queries, const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0,
                        int64_t n, float* scores);

}  // namespace iron::ops::attention
