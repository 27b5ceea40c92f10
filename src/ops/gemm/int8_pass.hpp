// The int8 path's loop over a rearranged W (kernels.hpp), written once for every instruction
// set: AVX-512 VNNI's (16 rows a register, gemm_avx512.cpp), AVX2's and AVX-VNNI's (8 rows,
// int8_avx2_loops.hpp) and ARM's sdot (4 rows, int8_dotprod.cpp). Each includes this, then
// defines its `Lanes`:
//   kRows: rows of W a register holds (a part of the group; the group has 16 / kRows);
//   fzero(): a zero f32 accumulator, izero(): zero int32 sums, broadcast(int32 bits of 4 values
//     of x): a register of them, store(float*, acc); their types name the registers (AccOf,
//     SumsOf, BytesOf below; an unpacked operand of quants is a BytesOf too);
//   Scales<T>: load(group, b, part), a part's scales of block b, as finish<T> reads them: d and
//     m (q6_k: d16[0] and d16[1], its halves' scales), registers of the accumulator's type;
//   unpack<T>(quants, c, part, &lo, &hi): load c (0-3) of block quants for `part`;
//   Dot<T>: a (part, row of x)'s sums of a block: a default of zero, add(lo, hi, x_lo, x_hi, c),
//     and `sums`, what finish<T> takes (q6_k: one per half of the block); DotInstruction below
//     where one instruction adds the products of 4 bytes into each int32 lane, L::dot<T>;
//   finish<T>(scales, sums, x's scale, xsum, xsum16, acc): the block's f32 epilogue into acc,
//     reading the scales' d and m (q6_k: d16) of a Scales<T> or a KeptScales;
//   prefetch(at): a cache line; ahead(R): how far ahead a pass of R rows prefetches;
//   kPassRows<T>, kPassParts: rows of x and parts a pass of several rows takes;
//   kUnpackOnce<T>: whether a call of several passes unpacks each group once for all of them;
//   kScalesAfterProducts<T>: whether a block's scales are loaded after its products (not before).
// Everything here has internal linkage: each file builds its copy for its own instructions.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

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

// Block quants' lines (int8_prefetch_lines), `ahead` bytes on, through the Lanes' prefetch.
template <class L, DType T>
inline void prefetch_block(const char* quants, int64_t ahead) {
  for (int c = 0; c < int8_prefetch_lines(T); ++c) L::prefetch(quants + ahead + 64 * c);
}

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

// Where a pass reads a group of W: the packed group itself, its quants unpacked and its scales
// converted as the pass goes (a decode's one row, a batched step's few), or a copy of the group
// unpacked once (UnpackedGroup, below) for the many passes of a prefill's rows.
template <class L, DType T>
struct PackedGroup {
  const char* group;
  static constexpr bool kPrefetch = true;
  const char* quants(int64_t b) const { return group + int8_quants_at(T, b); }
  // Block b's scales for a part, loaded into `s`: k-quants' keep their super-block's from one
  // block to the next, so `s` lives across blocks.
  [[gnu::always_inline]] const typename L::template Scales<T>& scales(int64_t b, int part,
                                                                      typename L::template Scales<T>& s) const {
    s.load(group, b, part);
    return s;
  }
  [[gnu::always_inline]] void unpack(int64_t b, int c, int part, BytesOf<L>* lo, BytesOf<L>* hi) const {
    L::template unpack<T>(quants(b), c, part, lo, hi);
  }
};

// What finish<T> reads of a block's scales, kept by UnpackedGroup: d and m, or q6_k's d16.
template <class L, DType T>
struct KeptScales {
  AccOf<L> d, m;
};
template <class L>
struct KeptScales<L, DType::q6_k> {
  AccOf<L> d16[2];
};

// A register of bytes in memory (a vector type's attributes are lost as a template argument,
// not as a member's).
template <class L>
struct StoredBytes {
  BytesOf<L> value;
};

// A group as the pass's registers hold it, stored once: each block's scales as finish reads them
// (every part's), then its quants (for c 0-3, every part: lo, hi). A pass over it loads registers
// where a pass over the packed group computes them; a prefill's rows run many passes over a group
// (32 rows are 4 of AVX-512's, 8 of AVX2's), which each unpacked it again. The same values
// either way, so the same bits.
template <class L, DType T>
struct UnpackedGroup {
  static constexpr int kParts = int(kInt8Rows / L::kRows);
  using Kept = KeptScales<L, T>;
  const Kept* kept;               // [block][part]
  const StoredBytes<L>* unpacked;  // [block][c][part][lo, hi]
  static constexpr bool kPrefetch = false;  // the copy is in cache
  // Block b's scales for a part: where they are kept (finish reads them from there; the pass's
  // own Scales, which a PackedGroup loads, is not needed).
  [[gnu::always_inline]] const Kept& scales(int64_t b, int part, typename L::template Scales<T>&) const {
    return kept[b * kParts + part];
  }
  // Quad c of block b's quants for a part, as unpack_group stored them: two loads.
  [[gnu::always_inline]] void unpack(int64_t b, int c, int part, BytesOf<L>* lo, BytesOf<L>* hi) const {
    const StoredBytes<L>* at = unpacked + ((b * 4 + c) * kParts + part) * 2;
    *lo = at[0].value;
    *hi = at[1].value;
  }
};

// Storage for one group's UnpackedGroup, per thread: grown to the widest k met and kept for the
// thread's life (640 bytes a block of 32 columns: 179 KiB for k = 8960, each kind apart).
template <class L, DType T>
struct UnpackedStorage {
  std::vector<typename UnpackedGroup<L, T>::Kept> kept;
  std::vector<StoredBytes<L>> unpacked;
};

// The group (blocks of 32 columns) unpacked into this thread's storage: valid until the thread's
// next call for the same kind.
template <class L, DType T>
UnpackedGroup<L, T> unpack_group(const char* group, int64_t blocks) {
  constexpr int kParts = UnpackedGroup<L, T>::kParts;
  thread_local UnpackedStorage<L, T> copy;
  if (int64_t(copy.kept.size()) < blocks * kParts) {
    copy.unpacked.resize(size_t(blocks * 4 * kParts * 2));  // first: if it throws, neither grew
    copy.kept.resize(size_t(blocks * kParts));
  }
  const PackedGroup<L, T> packed{group};
  typename L::template Scales<T> sc[kParts];
  for (int64_t b = 0; b < blocks; ++b) {
    // The packed group comes from memory here (each chunk of a prefill's rows unpacks it again)
    // and this loop does little else, so it waits on every line the hardware prefetcher has not
    // fetched, a K-quant super-block's scales (after its 8 blocks' quants) most: as far ahead as
    // a one-row pass, which streams W too. q6_k at 512 rows on a Zen 4 core with AVX-512 (8960->1536,
    // bench_gemv): the unpacking 38% of the kernel's samples without, 24% with (perf record).
    prefetch_block<L, T>(packed.quants(b), L::ahead(1));
    for (int p = 0; p < kParts; ++p) {
      const auto& s = packed.scales(b, p, sc[p]);
      auto& kept = copy.kept[size_t(b * kParts + p)];
      if constexpr (T == DType::q6_k)
        kept.d16[0] = s.d16[0], kept.d16[1] = s.d16[1];
      else
        kept.d = s.d, kept.m = s.m;
    }
    for (int c = 0; c < 4; ++c)
      for (int p = 0; p < kParts; ++p) {
        auto* at = copy.unpacked.data() + ((b * 4 + c) * kParts + p) * 2;
        packed.unpack(b, c, p, &at[0].value, &at[1].value);
      }
  }
  return {copy.kept.data(), copy.unpacked.data()};
}

// R rows of x (from i0) against P parts of one group from part p0: kRows output columns per row
// and part, at y + kRows p. One row (a decode) takes every part in one pass: each block's x is
// broadcast once for the 16 rows, and the group is read once (a pass per part read it again
// from the cache, and broadcast x again). Each row of x gets the same operations in the same
// order whatever R and P are, and whichever Source the group is read from, so a row's outputs
// do not depend on the rows beside it (a batched decode step's streams get what they would
// alone).
template <class L, DType T, int R, int P, class Source>
inline void int8_pass(const GemmInt8Args& g, int64_t i0, const Source& src, int p0, float* y) {
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
    if constexpr (Source::kPrefetch)
      if (p0 == 0)  // the first part's pass prefetches
        prefetch_block<L, T>(src.quants(b), L::ahead(R));
    using BlockScales = std::remove_reference_t<decltype(src.scales(b, p0, sc[0]))>;  // Scales<T> or KeptScales
    const BlockScales* block_scales[P];
    constexpr bool kScalesLate = L::template kScalesAfterProducts<T>;
    if constexpr (!kScalesLate)
      for (int p = 0; p < P; ++p) block_scales[p] = &src.scales(b, p0 + p, sc[p]);
    typename L::template Dot<T> dot[P][R];
    // c a constant in each step, where a Dot picks the half of q6_k's sums or widens its partial
    // sums: indexed at run time those sums live on the stack, which made AVX2's q4_1 loop 3.5
    // times slower (a `#pragma GCC unroll` did it until GCC left the loop rolled in
    // UnpackedGroup's instances: AVX2's q4_k 1.7x slower).
    auto step = [&](auto quad) {
      constexpr int c = decltype(quad)::value;
      BytesOf<L> lo[P], hi[P];
      for (int p = 0; p < P; ++p) src.unpack(b, c, p0 + p, &lo[p], &hi[p]);
      for (int r = 0; r < R; ++r) {
        const BytesOf<L> x_lo = x4(r, b * 32 + 8 * c), x_hi = x4(r, b * 32 + 8 * c + 4);
        for (int p = 0; p < P; ++p) dot[p][r].add(lo[p], hi[p], x_lo, x_hi, c);
      }
    };
    step(std::integral_constant<int, 0>{});
    step(std::integral_constant<int, 1>{});
    step(std::integral_constant<int, 2>{});
    step(std::integral_constant<int, 3>{});
    if constexpr (kScalesLate)
      for (int p = 0; p < P; ++p) block_scales[p] = &src.scales(b, p0 + p, sc[p]);
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r)
        acc[p][r] = L::template finish<T>(*block_scales[p], dot[p][r].sums, scale[r][b], xsum[r][b], xsum16[r] + 2 * b, acc[p][r]);
  }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) L::store(y + r * g.ldy + L::kRows * (p0 + p), acc[p][r]);
}

// Rows [i, m) of x, fewer than a full pass, in one pass of as many rows.
template <class L, DType T, class Source, int R = L::template kPassRows<T> - 1>
void int8_pass_tail(const GemmInt8Args& g, int64_t i, const Source& src, int p, float* y) {
  if constexpr (R >= 1) {
    if (g.m - i == R) return int8_pass<L, T, R, L::kPassParts>(g, i, src, p, y + i * g.ldy);
    int8_pass_tail<L, T, Source, R - 1>(g, i, src, p, y);
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
      int8_pass<L, T, 1, kParts>(g, 0, PackedGroup<L, T>{group}, 0, y);
      continue;
    }
    auto passes = [&](const auto& src) {
      for (int p = 0; p < kParts; p += L::kPassParts) {
        int64_t i = 0;
        for (; i + kPass <= g.m; i += kPass) int8_pass<L, T, kPass, L::kPassParts>(g, i, src, p, y + i * g.ldy);
        if (i < g.m) int8_pass_tail<L, T>(g, i, src, p, y);
      }
    };
    // Three passes or more: unpack the group once for all of them, where the Lanes say that is
    // faster. Two passes share too little of it: a batched decode step's 5 to 8 rows on AVX2
    // (two 4-row passes) ran as fast or up to 14% slower unpacking once, 12 rows 4-20% faster
    // (bench_gemv, SmolLM2's and Gemma 3's shapes, one thread, this Emerald Rapids core).
    if constexpr (L::template kUnpackOnce<T>)
      if (g.m > 2 * kPass) {
        passes(unpack_group<L, T>(group, g.k / 32));
        continue;
      }
    passes(PackedGroup<L, T>{group});
  }
}

}  // namespace
}  // namespace iron::ops::gemm
