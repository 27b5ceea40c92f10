// The portable tile (tile.hpp): keys of a block converted to f32 once, then scored against every
// query of the tile; each value row converted once and added into every query's accumulator.
#include "ops/attention/tile.hpp"
#include "ops/op.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "iron/error.hpp"

namespace iron::ops::attention {

namespace {

uint16_t half_at(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

}  // namespace

void load(DType t, const char* buffer, int64_t e, int64_t n, float* out) {
  switch (t) {
    case DType::f32:
      std::memcpy(out, buffer + e * 4, size_t(n) * 4);
      return;
    case DType::f16:
    case DType::bf16:
      to_f32(t, buffer + e * 2, out, n);
      return;
    case DType::q8_0:
      // A row of a kv head need not start a block (head_dim 80: head 1 starts 16 into one).
      for (int64_t i = 0; i < n; ++i) {
        const char* block = buffer + (e + i) / 32 * 34;
        out[i] = f16_to_f32(half_at(block)) * float(int8_t(block[2 + (e + i) % 32]));
      }
      return;
    default:
      value_error("Attention: a cache of " + std::string(name(t)) + " (f32, f16, bf16 or q8_0 are read)");
  }
}

void portable_tile(DType kt, DType vt, const Tile& a) {
  const int64_t w = a.width, per = a.queries, all = a.heads * per;
  float* keys = a.work;                              // the block's keys, kv head by kv head
  float* weights = keys + kKeyBlock * w * a.heads;   // kKeyBlock per query
  float* value = weights + kKeyBlock * all;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, a.end - j0);
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t j = 0; j < n; ++j)
        load(kt, a.k, a.k0 + h * a.d + (j0 + j) * a.stride, a.d, keys + (h * kKeyBlock + j) * w);
    for (int64_t m = 0; m < all; ++m) {
      float* p = weights + m * kKeyBlock;
      const int64_t valid = std::min(n, a.limit[m] - j0), first = std::max<int64_t>(0, a.from[m] - j0);
      std::fill(p, p + kKeyBlock, 0.0f);
      if (valid <= first) continue;
      const float* k = keys + m / per * kKeyBlock * w;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t j = first; j < valid; ++j) top = std::max(top, p[j] = dot(a.q + m * w, k + j * w, a.d));
      float* acc = a.acc + m * w;
      if (top > a.max[m]) {  // rescale what came before to the new maximum
        const float shrink = std::exp(a.max[m] - top);
        a.sum[m] *= shrink;
        for (int64_t i = 0; i < a.d; ++i) acc[i] *= shrink;
        a.max[m] = top;
      }
      float sum = 0;
      for (int64_t j = first; j < valid; ++j) sum += p[j] = std::exp(p[j] - a.max[m]);
      a.sum[m] += sum;
    }
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t j = 0; j < n; ++j) {
        load(vt, a.v, a.v0 + h * a.d + (j0 + j) * a.stride, a.d, value);
        for (int64_t m = h * per; m < (h + 1) * per; ++m) {
          const float e = weights[m * kKeyBlock + j];
          float* acc = a.acc + m * w;
          for (int64_t i = 0; i < a.d; ++i) acc[i] += e * value[i];
        }
      }
  }
}

}  // namespace iron::ops::attention
