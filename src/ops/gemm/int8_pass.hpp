// The int8 path's loop over a rearranged W (kernels.hpp), written once for every instruction
// set: AVX-512 VNNI's (16 rows a register, gemm_avx512.cpp), AVX2's and AVX-VNNI's (8 rows,
// int8_avx2_loops.hpp) and ARM's sdot (4 rows, int8_dotprod.cpp). Each includes this, then
// defines its `Lanes`:
//   kRows: rows of W a register holds (a part of the group; the group has 16 / kRows);
//   fzero(): a zero f32 accumulator, izero(): zero int32 sums, broadcast(int32 bits of 4 values
//     of x): a register of them, store(float*, acc); their types name the registers (AccOf,
//     SumsOf, BytesOf below; an unpacked operand of quants is a BytesOf too);
//   Scales<T>: load(group, b, part), a part's scales of block b, as finish<T> reads them;
//   unpack<T>(quants, c, part, &lo, &hi): load c (0-3) of block quants for `part`;
//   Dot<T>: a (part, row of x)'s sums of a block: a default of zero, add(lo, hi, x_lo, x_hi, c),
//     and `sums`, what finish<T> takes (q6_k: one per half of the block); DotInstruction below
//     where one instruction adds the products of 4 bytes into each int32 lane, L::dot<T>;
//   finish<T>(scales, sums, x's scale, xsum, xsum16, acc): the block's f32 epilogue into acc;
//   prefetch(at): a cache line; ahead(R): how far ahead a pass of R rows prefetches;
//   kPassRows<T>, kPassParts: rows of x and parts a pass of several rows takes.
// Everything here has internal linkage: each file builds its copy for its own instructions.
#pragma once

#include <cstdint>

#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

// Bytes ahead of the block being read that a pass prefetches where the registers hold part of a
// group (the hardware prefetcher has not ramped up within a short call, nor kept up over weights
// larger than the cache). A decode's one row streams W from memory and gains from prefetching 4
// KiB ahead (Qwen2.5-Coder-1.5B at 2 threads, IRON_CPU=avx2: 20.0-22.2 -> 25.0-26.3 t/s; Gemma 3
// 270M 62-76% -> 78-83% of the streaming-read bound); a prefill's passes of several rows read
// each group many times from the cache, where 1 KiB ahead did as well or better.
constexpr int64_t part_prefetch_ahead(int rows) { return rows == 1 ? 4096 : 1024; }

// A Lanes's registers, named by what its functions return: the f32 accumulator, the int32 sums,
// and bytes (4 values of x broadcast, or an unpacked operand of W's quants).
template <class L>
using AccOf = decltype(L::fzero());
template <class L>
using SumsOf = decltype(L::izero());
template <class L>
using BytesOf = decltype(L::broadcast(0));

// Dot<T> where an instruction (`L::dot<T>(sums, w, x)`: AVX-512 VNNI's and AVX-VNNI's vpdpbusd,
// ARM's sdot) adds the products of each 4 bytes of w and x into an int32 lane: straight into
// the sums, q6_k's columns 0-15 and 16-31 apart (each 16 has its own scale), the rest in sums[0].
template <class L, DType T>
struct DotInstruction {
  SumsOf<L> sums[2] = {L::izero(), L::izero()};
  [[gnu::always_inline]] void add(BytesOf<L> lo, BytesOf<L> hi, BytesOf<L> x_lo, BytesOf<L> x_hi, int c) {
    const int half = T == DType::q6_k ? c / 2 : 0;
    sums[half] = L::template dot<T>(sums[half], lo, x_lo);
    sums[half] = L::template dot<T>(sums[half], hi, x_hi);
  }
};

// R rows of x (from i0) against P parts of one group from part p0: kRows output columns per row
// and part, at y + kRows p. One row (a decode) takes every part in one pass: each block's x is
// broadcast once for the 16 rows, and the group is read once (a pass per part read it again
// from the cache, and broadcast x again). Each row of x gets the same operations in the same
// order whatever R and P are, so a row's outputs do not depend on the rows beside it (a batched
// decode step's streams get what they would alone).
template <class L, DType T, int R, int P>
inline void int8_pass(const GemmInt8Args& g, int64_t i0, const char* group, int p0, float* y) {
  const int64_t blocks = g.k / 32;
  const int8_t* q[R];
  const float *scale[R], *xsum[R], *xsum16[R];
  AccOf<L> acc[P][R];
  for (int r = 0; r < R; ++r) {
    q[r] = g.q + (i0 + r) * g.k;
    scale[r] = g.scale + (i0 + r) * blocks;
    xsum[r] = g.xsum + (i0 + r) * blocks;
    xsum16[r] = g.xsum16 + (i0 + r) * 2 * blocks;
    for (int p = 0; p < P; ++p) acc[p][r] = L::fzero();
  }
  auto x4 = [&](int r, int64_t at) {
    int32_t v;
    __builtin_memcpy(&v, q[r] + at, 4);
    return L::broadcast(v);
  };
  typename L::template Scales<T> sc[P];
  for (int64_t b = 0; b < blocks; ++b) {
    const char* quants = group + int8_quants_at(T, b);
    if (p0 == 0)  // the first part's pass prefetches
      for (int c = 0; c < int8_prefetch_lines(T); ++c) L::prefetch(quants + L::ahead(R) + 64 * c);
    for (int p = 0; p < P; ++p) sc[p].load(group, b, p0 + p);
    typename L::template Dot<T> dot[P][R];
    // Unrolled, so each load's c is a constant where a Dot picks the half of q6_k's sums, or
    // widens its partial sums: otherwise those sums are indexed at run time and live on the
    // stack, which made AVX2's q4_1 loop 3.5 times slower.
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      BytesOf<L> lo[P], hi[P];
      for (int p = 0; p < P; ++p) L::template unpack<T>(quants, c, p0 + p, &lo[p], &hi[p]);
      for (int r = 0; r < R; ++r) {
        const BytesOf<L> x_lo = x4(r, b * 32 + 8 * c), x_hi = x4(r, b * 32 + 8 * c + 4);
        for (int p = 0; p < P; ++p) dot[p][r].add(lo[p], hi[p], x_lo, x_hi, c);
      }
    }
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r)
        acc[p][r] = L::template finish<T>(sc[p], dot[p][r].sums, scale[r][b], xsum[r][b], xsum16[r] + 2 * b, acc[p][r]);
  }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) L::store(y + r * g.ldy + L::kRows * (p0 + p), acc[p][r]);
}

// Rows [i, m) of x, fewer than a full pass, in one pass of as many rows.
template <class L, DType T, int R = L::template kPassRows<T> - 1>
void int8_pass_tail(const GemmInt8Args& g, int64_t i, const char* group, int p, float* y) {
  if constexpr (R >= 1) {
    if (g.m - i == R) return int8_pass<L, T, R, L::kPassParts>(g, i, group, p, y + i * g.ldy);
    int8_pass_tail<L, T, R - 1>(g, i, group, p, y);
  }
}

// Group by group, so a group of W (16 rows, a few KiB) stays in L1 while every row meets it.
template <class L, DType T>
void int8_groups(const GemmInt8Args& g) {
  const int64_t group_bytes = PackedInt8::group_bytes(g.k, T);
  constexpr int kParts = int(kInt8Rows / L::kRows), kPass = L::template kPassRows<T>;
  for (int64_t j = 0; j < g.groups; ++j) {
    const char* group = g.w + j * group_bytes;
    float* y = g.y + j * kInt8Rows;
    if (g.m == 1) {
      int8_pass<L, T, 1, kParts>(g, 0, group, 0, y);
      continue;
    }
    for (int p = 0; p < kParts; p += L::kPassParts) {
      int64_t i = 0;
      for (; i + kPass <= g.m; i += kPass) int8_pass<L, T, kPass, L::kPassParts>(g, i, group, p, y + i * g.ldy);
      if (i < g.m) int8_pass_tail<L, T>(g, i, group, p, y);
    }
  }
}

}  // namespace
}  // namespace iron::ops::gemm
