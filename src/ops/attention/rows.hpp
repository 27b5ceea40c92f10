// One query row of one head attending over an f32 cache: the loop of the Attention kernel's
// per_head path (the kernel before grouped tiles, kept as the benchmark's baseline), with an
// AVX-512 build beside the portable one (chosen by what the CPU has).
#pragma once

#include <cstdint>

namespace iron::ops::attention {

struct RowArgs {
  const float* q;       // the query row, already scaled (d floats)
  const float* k;       // key 0 of this kv head
  const float* v;       // value 0 of this kv head
  int64_t stride;       // floats from one key (value) of the head to the next
  int64_t d;            // head_dim
  int64_t keys;         // keys to attend to (at least 1)
  int64_t block;        // keys per block of the online softmax
  float* scores;        // scratch of `block` floats
  float* out;           // d floats: the attended row
};

/// Online softmax over blocks of keys; nullptr where the CPU lacks AVX-512 or d > 256 (and in
/// every build for a processor other than x86-64).
using RowFn = void (*)(const RowArgs&);
RowFn avx512_row(int64_t d);

}  // namespace iron::ops::attention
