// An encoder's bidirectional attention (Attention with `segment`) at Precision::medium on AMX
// bf16 tiles: one query head of one segment at a time. A segment is at most a few hundred rows,
// so its scores fit in the first-level cache whole: no online softmax, one pass of products
// (q.k on tiles), one softmax per row, one pass of weighted values (on tiles). The f32 tiles
// (tile.hpp) do the same products one FMA per 16 and then sum each query's 16 running sums
// across lanes, which at head_dim 32 costs as much as the products: attention was 28% of
// all-MiniLM-L6-v2's time at 128 tokens.
//
// Rounding: the queries (scaled), keys, values and the softmax's weights are rounded to bf16
// (as medium's matmuls round their inputs); products are summed in f32, and each row's weights
// sum to one as rounded. Built with -mamx-tile -mamx-bf16 (files named *_amx.cpp); called only
// where cpu::Features says the OS lets this process use the tiles.
#pragma once

#include <cstdint>

namespace iron::ops::attention {

/// The largest head_dim and segment the AMX path takes (a segment's scores, 16 rows of them, and
/// its keys and values in bf16 stay within the scratch sized from these; others take tile.hpp's).
constexpr int64_t kSegmentAmxMaxDim = 256, kSegmentAmxMaxRows = 1024;

/// One query head of one segment. Rows [0, queries) attend to keys [0, keys); rows [queries,
/// written) are written as zeros (padding); rows past `written` are not touched.
struct SegmentHead {
  const float* q;       // the segment's row 0 of the query head; rows `q_stride` floats apart
  const float* k;       // the segment's row 0 of its kv head in the keys; rows `kv_stride` apart
  const float* v;       // and in the values
  float* y;             // the output's row 0 of the query head; rows `q_stride` apart
  int64_t q_stride, kv_stride;
  int64_t d;            // head_dim: a multiple of 16, at most kSegmentAmxMaxDim
  int64_t queries, written, keys;  // keys at most kSegmentAmxMaxRows
  float scale;
  float* work;          // segment_amx_work_floats(segment, d) floats, 64-byte aligned
};

/// The scratch floats segment_head_amx needs for segments of `rows` rows and head_dim `d`.
int64_t segment_amx_work_floats(int64_t rows, int64_t d);

void segment_head_amx(const SegmentHead& s);

}  // namespace iron::ops::attention
