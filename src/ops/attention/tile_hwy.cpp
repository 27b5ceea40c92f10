// The Attention tile (tile.hpp) in vector lanes, written once with Highway
// (devices/cpu/highway.hpp) for every target it has here: the AVX-512 and AVX2 copies are picked
// today; the NEON and SVE ones compile for the day the kernel table takes them. A vector holds N
// floats (16 on AVX-512, 8 on AVX2, 4 on 128-bit targets and on SVE, whose width is known only at
// run time), and a block of keys is N keys: one vector of scores. Two loops over blocks:
// - the register tile: each key and value vector converted from the cache straight into
//   registers and used by up to 4 query vectors at once (3 where there are 16 registers). Every
//   decode step runs it, and so does a prefill where N < 16 (AVX2: the cache's conversion, a
//   scalar one in the portable tile, cost AVX2-only processors most: 1.3 GB/s from f16 on one
//   core, 0.4 from q8_0, before AVX2 had this loop);
// - the scratch tile, AVX-512's prefill: the block's key and value rows converted into scratch
//   once, whole cache rows in order, then read back by the tile's dozens of query vectors.
// Both take the products and sums in one order: a key's score is N running sums over its row's
// vectors in order, reduced by one tree (sum_each), and values are added key by key.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/attention/int8_scores.hpp"
#include "ops/attention/tile.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention/tile_hwy.cpp"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "devices/cpu/hwy_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace iron::ops::attention_hwy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using attention::kKeyBlock;
using attention::RoundedQueries;
using attention::Tile;
using attention::TileFn;

#if HWY_TARGET == HWY_SCALAR
// One lane a vector (the baseline of a build for x86-64 without SSSE3): no tile; the portable
// one serves, as it would anyway (IRON_HWY_PICK never takes this copy).
attention::Tiles tiles(DType, int64_t, bool) { return {}; }
#else

// SVE's vectors are as wide as the processor's, from 128 bits: 4 floats is what every one holds,
// so N is a constant there too (the loops below are unrolled over it).
#if HWY_HAVE_SCALABLE
using D = hn::CappedTag<float, 4>;
#else
using D = hn::CappedTag<float, 16>;  // no more lanes than a block of scores (kKeyBlock)
#endif
using V = hn::Vec<D>;
constexpr int kN = int(hn::MaxLanes(D()));
static_assert(kN >= 4 && kN <= kKeyBlock && kKeyBlock % kN == 0,
              "a block of keys is one vector of scores");

// How many query vectors share each key and value vector, and how many sums they keep in
// registers, from the registers the target has (x86 before AVX-512: 16).
#if HWY_ARCH_X86 && HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
constexpr int kRegisters = 16;
#else
constexpr int kRegisters = 32;
#endif
constexpr int kMaxQueries = kRegisters == 32 ? 4 : 3;
// Keys scored at once for B query vectors (B x that many running sums): 24 sums at most with 32
// registers, 12 with 16.
constexpr int keys_at_once(int B) { return kRegisters == 32 && B <= 3 && kN >= 8 ? 8 : 4; }
// A row's vectors of values summed at once for B query vectors.
constexpr int value_vectors(int B) { return (kRegisters == 32 ? 16 : 12) / B; }

inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// Every loop over a constant count of vectors held in Vecs is unrolled (#pragma GCC unroll), so
// that they stay in registers: GCC 12 left some rolled and kept the running sums in memory,
// stored and reloaded every step (124 spills in the f16 decode block for 3 query vectors). The
// loops over a row's vectors (up to 64 on 128-bit targets) are left to the compiler. A loop
// annotated has a constant bound alone (a part chunk of a row is an `if` inside): at -O1 (the
// ARM64 build) GCC drops the annotation of a loop with a compound condition, and warns.

// `Count` vectors, indexed by constants once the loops over them are unrolled: an array of
// vectors, which the compiler keeps in registers; on SVE, whose vectors have no size (no arrays
// of them), aligned memory, loaded and stored at each use.
template <int Count>
class Vecs {
 public:
  // Defined here, within the target's attributes: an implicit one is not, and may not call
  // NEON's vector constructors.
  HWY_INLINE Vecs() {}
#if HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 || \
    HWY_TARGET == HWY_SVE2_128
  HWY_INLINE V get(int i) const { return hn::Load(D(), lanes_ + i * kN); }
  HWY_INLINE void set(int i, V v) { hn::Store(v, D(), lanes_ + i * kN); }

 private:
  HWY_ALIGN float lanes_[Count * kN];
#else
  HWY_INLINE V get(int i) const { return v_[i]; }
  HWY_INLINE void set(int i, V v) { v_[i] = v; }

 private:
  V v_[Count];
#endif
};

// ---- reading the caches -------------------------------------------------------------------------

// The scale of the q8_0 block at `block`, in every lane.
HWY_INLINE V block_scale(const char* block) {
  const hn::Rebind<hwy::float16_t, D> dh;
  const hn::RebindToUnsigned<decltype(dh)> du;
  uint16_t bits;
  std::memcpy(&bits, block, 2);
  return hn::PromoteTo(D(), hn::BitCast(dh, hn::Set(du, bits)));
}

// N int8 values from p, as f32.
HWY_INLINE V int8_lanes(const char* p) {
  const D d;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<int8_t, D> d8;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p))));
}

// Elements [e, e + N) of a cache of dtype T as f32 (q8_0: the N lie in one block).
template <DType T>
HWY_INLINE V load(const char* buffer, int64_t e) {
  const D d;
  if constexpr (T == DType::f32) {
    return hn::LoadU(d, reinterpret_cast<const float*>(buffer) + e);
  } else if constexpr (T == DType::f16) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(buffer) + e));
  } else if constexpr (T == DType::bf16) {
    const hn::Rebind<hwy::bfloat16_t, D> db;
    return hn::PromoteTo(d, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(buffer) + e));
  } else {
    static_assert(T == DType::q8_0);
    const char* block = buffer + (e >> 5) * 34;
    return hn::Mul(int8_lanes(block + 2 + (e & 31)), block_scale(block));
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Rows of any head_dim: the last vector of a row may be part of one, read by masked loads, which
// do not touch memory past the row's end (the last kv head of a cache's last row ends the
// buffer). Elsewhere rows are whole vectors (head_dim a multiple of N), as AVX2's were before:
// its 16-bit masked loads read the whole vector, and copying a part out first put a call and
// spills into the loops.
constexpr bool kPartVectors = true;

// Elements [e, e + count) of a cache, count < N, as f32 with zeros after.
template <DType T>
HWY_INLINE V load_part(const char* buffer, int64_t e, int64_t count) {
  static_assert(T != DType::q8_0, "q8_0 rows are whole vectors");
  const D d;
  if constexpr (T == DType::f32) {
    return hn::MaskedLoad(hn::FirstN(d, size_t(count)), d,
                          reinterpret_cast<const float*>(buffer) + e);
  } else {
    const hn::Rebind<uint16_t, D> du;
    const auto bits = hn::MaskedLoad(hn::FirstN(du, size_t(count)), du,
                                     reinterpret_cast<const uint16_t*>(buffer) + e);
    if constexpr (T == DType::f16)
      return hn::PromoteTo(d, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), bits));
    else
      return hn::PromoteTo(d, hn::BitCast(hn::Rebind<hwy::bfloat16_t, D>(), bits));
  }
}
#else
constexpr bool kPartVectors = false;
#endif

// Vector c of the C a row takes, from element e: the last one `tail` elements long (N where the
// row is whole vectors).
template <DType T, int C>
HWY_INLINE V row_vector(const char* buffer, int64_t e, int c, int64_t tail) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (T != DType::q8_0)
    if (c == C - 1 && tail < kN) return load_part<T>(buffer, e + c * kN, tail);
#endif
  (void)tail;
  return load<T>(buffer, e + c * kN);
}

// Vectors c and, where P (q8_0 rows that start whole blocks, c even), c + 1 of the row from
// element e: a pair lies in one block, whose scale is read once for both.
template <DType T, int C, bool P>
HWY_INLINE void load_vectors(const char* buffer, int64_t e, int c, int64_t tail, V& x0, V& x1) {
  if constexpr (P) {
    const int64_t at = e + c * kN;
    const char* block = buffer + (at >> 5) * 34;
    const V scale = block_scale(block);
    x0 = hn::Mul(int8_lanes(block + 2 + (at & 31)), scale);
    x1 = hn::Mul(int8_lanes(block + 2 + (at & 31) + kN), scale);
  } else {
    x0 = row_vector<T, C>(buffer, e, c, tail);
    x1 = x0;
  }
}

// The byte of a cache that holds element e (q8_0: its block's first byte).
template <DType T>
constexpr int64_t byte_of(int64_t e) {
  if constexpr (T == DType::f32) return e * 4;
  if constexpr (T == DType::q8_0) return e / 32 * 34;
  return e * 2;
}

// ---- the scores' sums ---------------------------------------------------------------------------
//
// Lane j of a block's scores is the sum of the lanes of key j's running sum: a transpose-and-add
// tree, ~3 instructions a key instead of a horizontal reduction (~10, in one dependent chain)
// each, in steps a loop may interleave with its products. Four keys' sums make a quad (quad4);
// with 8 lanes two quads make the scores (pair_quads), with 16 two pairs of quads do (sum_pairs).
// There the quads are formed in the key order of key_quad (keys 0-3, 8-11, 4-7, 12-15), which
// sum_pairs' swap and blend put back in order. Each key's sum: per 128-bit block, (l0 + l2) +
// (l1 + l3) (8 lanes: (l0 + l1) + (l2 + l3)); then the blocks', (b0 + b2) + (b1 + b3).

// 128-bit block k of the result, lane i: the sum over block k of x_i.
HWY_INLINE V quad4(V x0, V x1, V x2, V x3) {
  const D d;
  const hn::Repartition<uint64_t, D> d64;
  if constexpr (kN == 8) {
    // 8 lanes pair a block's lanes as AVX2's own tile did (vhaddps: (l0 + l1) + (l2 + l3)), so
    // its copy gives that tile's bits: the whole-model tests' bounds were set on them (Gemma 3
    // at medium through the AVX2 path missed one more clear top-1 with the other pairing, 5
    // where llama.cpp's own count, the bound, is 4).
    const auto lo01 = hn::BitCast(d64, hn::InterleaveLower(d, x0, x1)),
               lo23 = hn::BitCast(d64, hn::InterleaveLower(d, x2, x3));
    const auto hi01 = hn::BitCast(d64, hn::InterleaveUpper(d, x0, x1)),
               hi23 = hn::BitCast(d64, hn::InterleaveUpper(d, x2, x3));
    const V first = hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, lo01, lo23)),
                            hn::BitCast(d, hn::InterleaveUpper(d64, lo01, lo23)));
    const V second = hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, hi01, hi23)),
                             hn::BitCast(d, hn::InterleaveUpper(d64, hi01, hi23)));
    return hn::Add(first, second);
  }
  const V a = hn::Add(hn::InterleaveLower(d, x0, x1), hn::InterleaveUpper(d, x0, x1));
  const V b = hn::Add(hn::InterleaveLower(d, x2, x3), hn::InterleaveUpper(d, x2, x3));
  const auto a64 = hn::BitCast(d64, a), b64 = hn::BitCast(d64, b);
  return hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, a64, b64)),
                 hn::BitCast(d, hn::InterleaveUpper(d64, a64, b64)));
}

// Two quads' blocks added in pairs: [q0's b0 + b2, its b1 + b3, q1's b0 + b2, its b1 + b3] (16
// lanes); with 8 lanes, [q0's keys, q1's keys].
HWY_INLINE V pair_quads(V q0, V q1) {
  const D d;
  return hn::Add(hn::ConcatLowerLower(d, q1, q0), hn::ConcatUpperUpper(d, q1, q0));
}

// 16 lanes: two pairs of quads (quads 0 and 1, 2 and 3) to [quad 0's keys, quad 2's, quad 1's,
// quad 3's].
HWY_INLINE V sum_pairs(V p01, V p23) {
  const V a = hn::Add(p01, hn::SwapAdjacentBlocks(p01)),
          b = hn::Add(p23, hn::SwapAdjacentBlocks(p23));
  return hn::OddEvenBlocks(b, a);
}

// The keys of the block (from 4 key_quad(q)) whose sums make its quad q.
constexpr int key_quad(int q) { return kN == 16 ? q % 2 * 2 + q / 2 : q; }

// Quad q of a block (of N / 4) formed: into the query's held quad and pair, or its scores.
HWY_INLINE void reduce(int q, V quad, V& held, V& pair, V& scores) {
  if constexpr (kN == 4) {
    scores = quad;
  } else if (q % 2 == 0) {
    held = quad;
  } else if constexpr (kN == 8) {
    scores = pair_quads(held, quad);
  } else if (q == 1) {
    pair = pair_quads(held, quad);
  } else {
    scores = sum_pairs(pair, pair_quads(held, quad));
  }
}

// Lane j: the sum of the lanes of s_j, for the block's N running sums.
HWY_INLINE V sum_each(const Vecs<kN>& s) {
  V held = s.get(0), pair = held, scores = held;
#pragma GCC unroll 64
  for (int q = 0; q < kN / 4; ++q) {
    const int k = 4 * key_quad(q);
    reduce(q, quad4(s.get(k), s.get(k + 1), s.get(k + 2), s.get(k + 3)), held, pair, scores);
  }
  return scores;
}

// Keys [first, valid) of a block (each held to [0, N]; none where valid <= first).
HWY_INLINE hn::Mask<D> keys_kept(int64_t first, int64_t valid) {
  const D d;
  return hn::AndNot(hn::FirstN(d, size_t(first)), hn::FirstN(d, size_t(valid)));
}

// The keys [first, valid) of the block from j0 that query m reads: below `valid` (its limit),
// and from a sliding window's first on.
struct Kept {
  int64_t first, valid;
};
inline Kept kept(const Tile& a, int64_t m, int64_t j0, int64_t n) {
  const int64_t valid = smaller(n, a.limit[m] - j0), first = a.from[m] > j0 ? a.from[m] - j0 : 0;
  if (valid <= first) return {0, 0};
  return {first, valid};
}

// ---- the scratch tile
// -----------------------------------------------------------------------------
//
// For each block: the block's key and value rows are converted to f32 (copied, for f32) into
// scratch, whole cache rows in order, which keeps the memory streaming (reading values piecewise
// as the sums wanted them ran 12-25% slower on cold caches); each query's N scores come from N
// running sums reduced together; and the values are added into up to four queries' accumulators
// at a time, held in registers.

// Adds a block's n values (f32, W floats apart), weighted, into the accumulators of B queries:
// `p` holds each query's weights (kKeyBlock apart), `acc` its accumulator (`width` floats apart).
// The accumulators of value_vectors(B) vectors of the row at a time stay in registers over the
// block: enough independent sums that the FMAs never wait on each other.
template <int C, int B>
HWY_INLINE void add_values(const float* values, int64_t n, const float* p, float* acc,
                           int64_t width) {
  constexpr int W = C * kN, G = C < value_vectors(B) ? C : value_vectors(B);
  const D d;
#pragma GCC unroll 64
  for (int c0 = 0; c0 < C; c0 += G) {
    Vecs<B * G> sum;
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) sum.set(i * G + c, hn::Load(d, acc + i * width + (c0 + c) * kN));
    for (int64_t j = 0; j < n; ++j)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) {
          const V v = hn::Load(d, values + j * W + (c0 + c) * kN);
#pragma GCC unroll 64
          for (int i = 0; i < B; ++i)
            sum.set(i * G + c, hn::MulAdd(hn::Set(d, p[i * kKeyBlock + j]), v, sum.get(i * G + c)));
        }
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) hn::Store(sum.get(i * G + c), d, acc + i * width + (c0 + c) * kN);
  }
}

// Rows [j0, j0 + n) of a cache (every kv head of each, from element e0 of row 0) as f32: row j's
// kv head h at out + (h * N + j) * W; rows past n repeat row n - 1. Whole cache rows, in order.
template <DType T, int C>
void convert(const char* buffer, int64_t e0, int64_t stride, int64_t heads, int64_t d, int64_t j0,
             int64_t n, int64_t tail, float* out) {
  constexpr int W = C * kN;
  for (int64_t j = 0; j < kN; ++j) {
    const int64_t e = e0 + (j0 + (j < n ? j : n - 1)) * stride;
    for (int64_t h = 0; h < heads; ++h)
      for (int c = 0; c < C; ++c)
        hn::Store(row_vector<T, C>(buffer, e + h * d, c, tail), D(),
                  out + (h * kN + j) * W + c * kN);
  }
}

template <DType T, int C>
void scratch_tile(const Tile& a) {
  constexpr int W = C * kN;
  const D d;
  const int64_t tail = a.d - int64_t(C - 1) * kN;
  const int64_t per = a.queries, all = a.heads * per, width = a.width;
  // The block's keys and values as f32, kv head by kv head (scoring addresses each at a
  // constant offset), and each query's weights.
  float* keys = a.work;
  float* values = keys + kKeyBlock * W * a.heads;
  float* weights = values + kKeyBlock * W * a.heads;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kN) {
    const int64_t n = smaller(kN, a.end - j0);
    convert<T, C>(a.k, a.k0, a.stride, a.heads, a.d, j0, n, tail, keys);
    convert<T, C>(a.v, a.v0, a.stride, a.heads, a.d, j0, n, tail, values);
    for (int64_t m = 0; m < all; ++m) {
      float* p = weights + m * kKeyBlock;
      const Kept keep = kept(a, m, j0, n);
      if (keep.valid == 0) {
        hn::Store(hn::Zero(d), d, p);
        continue;
      }
      const float* q = a.q + m * width;
      const float* k = keys + m / per * kN * W;
      Vecs<kN> s;
#pragma GCC unroll 64
      for (int j = 0; j < kN; ++j) s.set(j, hn::Zero(d));
      for (int c = 0; c < C; ++c) {
        const V qc = hn::Load(d, q + c * kN);
#pragma GCC unroll 64
        for (int j = 0; j < kN; ++j)
          s.set(j, hn::MulAdd(hn::Load(d, k + j * W + c * kN), qc, s.get(j)));
      }
      const auto mask = keys_kept(keep.first, keep.valid);
      const V scores = hn::IfThenElse(mask, sum_each(s), hn::Set(d, -INFINITY));
      const float top = hn::GetLane(hn::MaxOfLanes(d, scores));
      if (top > a.max[m]) {  // rescale what came before to the new maximum
        const float shrink = std::exp(a.max[m] - top);
        a.sum[m] *= shrink;
        float* acc = a.acc + m * width;
        for (int c = 0; c < C; ++c)
          hn::Store(hn::Mul(hn::Load(d, acc + c * kN), hn::Set(d, shrink)), d, acc + c * kN);
        a.max[m] = top;
      }
      const V e = hn::IfThenElseZero(
          mask, cpu::hwy_math::HWY_NAMESPACE::Exp(d, hn::Sub(scores, hn::Set(d, a.max[m]))));
      a.sum[m] += hn::GetLane(hn::SumOfLanes(d, e));
      hn::Store(e, d, p);
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      const float* v = values + h * kN * W;
      const int64_t end = (h + 1) * per;
      int64_t m = h * per;
      for (; m + 4 <= end; m += 4)
        add_values<C, 4>(v, n, weights + m * kKeyBlock, a.acc + m * width, width);
      switch (end - m) {
        case 3:
          add_values<C, 3>(v, n, weights + m * kKeyBlock, a.acc + m * width, width);
          break;
        case 2:
          add_values<C, 2>(v, n, weights + m * kKeyBlock, a.acc + m * width, width);
          break;
        case 1:
          add_values<C, 1>(v, n, weights + m * kKeyBlock, a.acc + m * width, width);
          break;
        default:
          break;
      }
    }
  }
}

// ---- the register tile
// ----------------------------------------------------------------------------
//
// The scratch tile converts each block of keys and values once and reads it back for every query
// vector: right for a prefill tile's dozens, but a decode step has only the group's (3 for
// SmolLM2) per kv head, and the stores and reloads of that scratch cost more than the products
// (AVX-512: 14.7 GB/s of f16 on one core with the caches hot in the processor's). Here each key
// and value vector is converted from the cache straight into registers and used by up to 4 query
// vectors at once (17.1 GB/s; bench_attention 1 5 hot). The products and sums are the scratch
// tile's in its order; only the factor that rescales a query's sums when its maximum rises is
// computed otherwise (register_block).

// Scores of keys [j0, j0 + N) of kv head h for B query vectors from m (rows past n repeat row
// n - 1; the caller masks them): J keys' sums at a time (B * J registers), each four summed to a
// quad as they are done. Each sum adds the row's vectors in order.
template <DType T, int C, int B, bool P>
HWY_INLINE void register_scores(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n,
                                int64_t tail, Vecs<B>& scores) {
  constexpr int J = keys_at_once(B);
  static_assert(B <= kMaxQueries && kN % J == 0 && J % 4 == 0, "whole quads of keys in a group");
  const D d;
  // (Zeros: each is written before it is read, which the compiler does not see through reduce.)
  Vecs<B> held, pair;
#pragma GCC unroll 64
  for (int i = 0; i < B; ++i) {
    held.set(i, hn::Zero(d));
    pair.set(i, hn::Zero(d));
    scores.set(i, hn::Zero(d));
  }
#pragma GCC unroll 64
  for (int group = 0; group < kN / J; ++group) {
    int64_t e[J];  // each key's first element of kv head h
#pragma GCC unroll 64
    for (int j = 0; j < J; ++j) {
      const int local = group * J + j, key = 4 * key_quad(local / 4) + local % 4;
      const int64_t row = j0 + key;
      e[j] = a.k0 + h * a.d + (row < j0 + n ? row : j0 + n - 1) * a.stride;
    }
    Vecs<B * J> s;
#pragma GCC unroll 64
    for (int i = 0; i < B * J; ++i) s.set(i, hn::Zero(d));
    for (int c = 0; c < C; c += P ? 2 : 1)
#pragma GCC unroll 64
      for (int j = 0; j < J; ++j) {
        V k0, k1;
        load_vectors<T, C, P>(a.k, e[j], c, tail, k0, k1);
#pragma GCC unroll 64
        for (int i = 0; i < B; ++i)
          s.set(i * J + j,
                hn::MulAdd(k0, hn::Load(d, a.q + (m + i) * a.width + c * kN), s.get(i * J + j)));
        if constexpr (P)
#pragma GCC unroll 64
          for (int i = 0; i < B; ++i)
            s.set(i * J + j, hn::MulAdd(k1, hn::Load(d, a.q + (m + i) * a.width + (c + 1) * kN),
                                        s.get(i * J + j)));
      }
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int g = 0; g < J / 4; ++g) {
        V h0 = held.get(i), p0 = pair.get(i), s0 = scores.get(i);
        const int k = i * J + 4 * g;
        reduce(group * (J / 4) + g, quad4(s.get(k), s.get(k + 1), s.get(k + 2), s.get(k + 3)), h0,
               p0, s0);
        held.set(i, h0);
        pair.set(i, p0);
        scores.set(i, s0);
      }
  }
}

// Adds keys [j0, j0 + n) of kv head h's values, weighted by `p` (kKeyBlock per query vector),
// into the accumulators of B query vectors from m: value_vectors(B) of a row's vectors at a time
// in registers (an even count where P), added key by key as the scratch tile adds them.
template <DType T, int C, int B, bool P>
HWY_INLINE void register_values(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n,
                                int64_t tail, const float* p) {
  constexpr int G = (C < value_vectors(B) ? C : value_vectors(B)) & (P ? ~1 : ~0);
  static_assert(G > 0, "a pair of vectors at least where P");
  const D d;
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
#pragma GCC unroll 64
  for (int c0 = 0; c0 < C; c0 += G) {
    Vecs<B * G> sum;
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) sum.set(i * G + c, hn::Load(d, a.acc + (m + i) * a.width + (c0 + c) * kN));
    for (int64_t j = 0; j < n; ++j) {
      Vecs<B> weight;
#pragma GCC unroll 64
      for (int i = 0; i < B; ++i) weight.set(i, hn::Set(d, p[i * kKeyBlock + j]));
#pragma GCC unroll 64
      for (int c = 0; c < G; c += P ? 2 : 1)
        if (c0 + c < C) {
          V v0, v1;
          load_vectors<T, C, P>(a.v, e0 + j * a.stride, c0 + c, tail, v0, v1);
#pragma GCC unroll 64
          for (int i = 0; i < B; ++i)
            sum.set(i * G + c, hn::MulAdd(weight.get(i), v0, sum.get(i * G + c)));
          if constexpr (P)
#pragma GCC unroll 64
            for (int i = 0; i < B; ++i)
              sum.set(i * G + c + 1, hn::MulAdd(weight.get(i), v1, sum.get(i * G + c + 1)));
        }
    }
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) hn::Store(sum.get(i * G + c), d, a.acc + (m + i) * a.width + (c0 + c) * kN);
  }
}

// The f16 scales of N q8_0 blocks as f32: key j's block at byte offset[j] from `base`, one
// gather of each block's first four bytes, the scale kept. Scalar loads into a buffer read back
// as one vector stall on store forwarding (bench_attention 1 3 hot 'q8_0 2048' medium: SmolLM2
// 10.4 GB/s that way, 11.4 this).
HWY_INLINE V q8_0_scales(const char* base, hn::Vec<hn::RebindToSigned<D> > offset) {
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint16_t, D> du16;
  const auto words = hn::GatherOffset(di, reinterpret_cast<const int32_t*>(base), offset);
  return hn::PromoteTo(D(), hn::BitCast(hn::Rebind<hwy::float16_t, D>(),
                                        hn::TruncateTo(du16, hn::BitCast(du, words))));
}

// register_values for q8_0 rows of whole blocks at medium (with the int8 scores): each block's
// scale is taken into the weights (N keys' at once per query and block) rather than into every
// value element, so a value vector is its int8 elements converted, nothing more; the products
// round otherwise than highest's (weight x scale, then x element), which medium allows.
template <int C, int B>
HWY_INLINE void scaled_weight_values(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n,
                                     const float* p) {
  constexpr int Blocks = C * kN / 32, G = (C < value_vectors(B) ? C : value_vectors(B)) & ~1;
  const D d;
  const hn::RebindToSigned<D> di;
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
  // Query i's weight of key j times the key's block b scale: w[(i * Blocks + b) * N + j].
  HWY_ALIGN float w[B * Blocks * kN];
  const auto rows = hn::Min(hn::Iota(di, 0), hn::Set(di, int32_t(n - 1)));
  const auto offset = hn::Mul(rows, hn::Set(di, int32_t(a.stride / 32 * 34)));
#pragma GCC unroll 64
  for (int b = 0; b < Blocks; ++b) {
    const V scale = q8_0_scales(a.v + ((e0 + b * 32) >> 5) * 34, offset);
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
      hn::Store(hn::Mul(hn::Load(d, p + i * kKeyBlock), scale), d, w + (i * Blocks + b) * kN);
  }
#pragma GCC unroll 64
  for (int c0 = 0; c0 < C; c0 += G) {
    Vecs<B * G> sum;
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) sum.set(i * G + c, hn::Load(d, a.acc + (m + i) * a.width + (c0 + c) * kN));
    for (int64_t j = 0; j < n; ++j)
#pragma GCC unroll 64
      for (int c = 0; c < G; c += 2)
        if (c0 + c < C) {
          const int64_t at = e0 + j * a.stride + (c0 + c) * kN;
          const char* block = a.v + (at >> 5) * 34 + 2 + (at & 31);
          const V lo = int8_lanes(block), hi = int8_lanes(block + kN);
#pragma GCC unroll 64
          for (int i = 0; i < B; ++i) {
            const V weight = hn::Set(d, w[(i * Blocks + (c0 + c) * kN / 32) * kN + j]);
            sum.set(i * G + c, hn::MulAdd(weight, lo, sum.get(i * G + c)));
            sum.set(i * G + c + 1, hn::MulAdd(weight, hi, sum.get(i * G + c + 1)));
          }
        }
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i)
#pragma GCC unroll 64
      for (int c = 0; c < G; ++c)
        if (c0 + c < C) hn::Store(sum.get(i * G + c), d, a.acc + (m + i) * a.width + (c0 + c) * kN);
  }
}

// Cache lines of the next block's keys and values to prefetch, [begin, end) of its rows' bytes
// from k and from v (none where k is null): each kv head's pass fetches its share, half before
// its scores and half before its values.
struct Ahead {
  const char *k = nullptr, *v = nullptr;
  int64_t begin = 0, end = 0;
  HWY_INLINE void fetch(int64_t from, int64_t to) const {
    if (!k) return;
    for (int64_t line = from; line < to; ++line) {
      hwy::Prefetch(k + line * 64);
      hwy::Prefetch(v + line * 64);
    }
  }
};

// One block for B query vectors from m of kv head h: scores, the online softmax's update, the
// weighted values. The update is the scratch tile's but for the factor that rescales a query's
// sums when its maximum rises: one vector e^x for the B queries (the scratch tile calls std::exp
// for each, a tenth of this tile's time when maxima rise often), so the two differ there by
// e^x's ulps. Where I (medium, q8_0, AVX512-VNNI), the scores are int8 products of the rounded
// queries (int8_scores.hpp).
template <DType T, int C, int B, bool P, bool I>
void register_block(const Tile& a, const RoundedQueries& rq, int64_t h, int64_t m, int64_t j0,
                    int64_t n, int64_t tail, const Ahead& ahead) {
  const D d;
  Vecs<B> scores;
  const int64_t half = (ahead.begin + ahead.end) / 2;
  ahead.fetch(ahead.begin, half);
  static_assert(!I || kN == kKeyBlock, "the int8 scores are AVX-512's");
  if constexpr (I) {
    HWY_ALIGN float s[B * kKeyBlock];
    attention::int8_scores_avx512(B, a, rq, h, m, j0, n, s);
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i) scores.set(i, hn::Load(d, s + i * kKeyBlock));
  } else {
    register_scores<T, C, B, P>(a, h, m, j0, n, tail, scores);
  }
  // B <= 4 <= N: the queries' maxima before and after the block, a lane each.
  HWY_ALIGN float before[kN] = {}, top[kN] = {}, shrink[kN];
  Kept keep[B];
  bool rise = false;
#pragma GCC unroll 64
  for (int i = 0; i < B; ++i) {
    keep[i] = kept(a, m + i, j0, n);
    const V s = hn::IfThenElse(keys_kept(keep[i].first, keep[i].valid), scores.get(i),
                               hn::Set(d, -INFINITY));
    scores.set(i, s);
    before[i] = a.max[m + i];
    top[i] = keep[i].valid > 0 ? hn::GetLane(hn::MaxOfLanes(d, s)) : -INFINITY;
    rise = rise || top[i] > before[i];
  }
  if (rise) {
    // e^(before - after) for the queries whose maximum rises: a query's first keys (before =
    // -inf) give ~1e-38, scaling its zeros.
    const V b = hn::Load(d, before);
    hn::Store(cpu::hwy_math::HWY_NAMESPACE::Exp(d, hn::Sub(b, hn::Max(hn::Load(d, top), b))), d,
              shrink);
#pragma GCC unroll 64
    for (int i = 0; i < B; ++i) {
      if (!(top[i] > before[i])) continue;
      a.sum[m + i] *= shrink[i];
      float* acc = a.acc + (m + i) * a.width;
      const V f = hn::Set(d, shrink[i]);
      for (int c = 0; c < C; ++c) hn::Store(hn::Mul(hn::Load(d, acc + c * kN), f), d, acc + c * kN);
      a.max[m + i] = top[i];
    }
  }
  float* weights = a.work;
#pragma GCC unroll 64
  for (int i = 0; i < B; ++i) {
    const V e = hn::IfThenElseZero(
        keys_kept(keep[i].first, keep[i].valid),
        cpu::hwy_math::HWY_NAMESPACE::Exp(d, hn::Sub(scores.get(i), hn::Set(d, a.max[m + i]))));
    a.sum[m + i] += hn::GetLane(hn::SumOfLanes(d, e));
    hn::Store(e, d, weights + i * kKeyBlock);
  }
  ahead.fetch(half, ahead.end);
  if constexpr (I)
    scaled_weight_values<C, B>(a, h, m, j0, n, weights);
  else
    register_values<T, C, B, P>(a, h, m, j0, n, tail, weights);
}

template <DType T, int C, bool P, bool I = false>
void register_tile(const Tile& a) {
  const int64_t tail = a.d - int64_t(C - 1) * kN;
  const int64_t per = a.queries;
  // Passes of 4 query vectors where they divide the group (Gemma 3's 4) and the registers
  // allow, else of at most 3, as even as they go: a pass converts every key, so fewer passes
  // convert less (passes of 2 + 2 ran Gemma's q8_0 at 6.0 GB/s on AVX-512 where the scratch
  // tile ran 6.9).
  const int64_t width = kMaxQueries == 4 && per % 4 == 0 ? 4 : 3,
                passes = (per + width - 1) / width;
  const int64_t block_bytes = byte_of<T>(a.stride * kN);
  RoundedQueries rq{};
  if constexpr (I) rq = attention::round_queries_avx512(a);
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kN) {
    const int64_t n = smaller(kN, a.end - j0);
    // The next block's rows, whole and in order, fetched ahead of this block's reads of one kv
    // head's part of each row at a time: without it one thread read cold f16 caches at 5.9 GB/s,
    // 7.5 with it (AVX-512). Fetched piecewise, a share before each kv head's scores and values:
    // two threads read cold q8_0 caches at 11.3 GB/s with the whole block fetched at once at its
    // start, 13.6 this way (medium; two or four blocks ahead measured no better; bench_attention).
    Ahead next;
    int64_t lines = 0;
    if (j0 + kN < a.end) {
      const int64_t at = j0 + kN, bytes = smaller(block_bytes, byte_of<T>((a.end - at) * a.stride));
      next = {a.k + byte_of<T>(a.k0 + at * a.stride), a.v + byte_of<T>(a.v0 + at * a.stride), 0, 0};
      lines = (bytes + 63) / 64;
    }
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t pass = 0, m = h * per; pass < passes; ++pass) {
        const int64_t b = (per * (pass + 1)) / passes - (per * pass) / passes;
        // This kv head's share of the lines, on its first pass.
        const int64_t share = pass == 0 ? lines : 0;
        next.begin = share * h / a.heads;
        next.end = share * (h + 1) / a.heads;
        switch (b) {
          case 4:
            if constexpr (kMaxQueries >= 4)
              register_block<T, C, 4, P, I>(a, rq, h, m, j0, n, tail, next);
            break;
          case 3:
            register_block<T, C, 3, P, I>(a, rq, h, m, j0, n, tail, next);
            break;
          case 2:
            register_block<T, C, 2, P, I>(a, rq, h, m, j0, n, tail, next);
            break;
          default:
            register_block<T, C, 1, P, I>(a, rq, h, m, j0, n, tail, next);
            break;
        }
        m += b;
      }
  }
}

// q8_0 rows that start whole blocks (head_dim a multiple of 32, the view's offset too) read a
// block's scale once for a pair of vectors; others read it per vector.
template <int C>
void register_tile_q8_0(const Tile& a) {
  if constexpr (C % 2 == 0) {
    if (a.d % 32 == 0 && a.k0 % 32 == 0 && a.v0 % 32 == 0)
      return register_tile<DType::q8_0, C, true>(a);
  }
  register_tile<DType::q8_0, C, false>(a);
}

#if HWY_TARGET == HWY_AVX3
// Medium's decode tile for q8_0 caches: integer scores where the rows start whole blocks (pairs
// of them: head_dim 64, 128, 256) and the rounded queries fit the work space, else the f32 scores.
template <int C>
void register_tile_q8_0_int8(const Tile& a) {
  if constexpr (C % 4 == 0) {
    const int64_t work_bytes = 4 * attention::work_floats(a.width, a.heads, a.queries);
    if (a.d % 64 == 0 && a.k0 % 32 == 0 && a.v0 % 32 == 0 &&
        attention::rounded_query_bytes(a.heads * a.queries, a.d) <= work_bytes)
      return register_tile<DType::q8_0, C, true, true>(a);
  }
  register_tile_q8_0<C>(a);
}
#endif

// The prefill tile: the scratch tile where vectors are 16 lanes (AVX-512), else the register tile.
constexpr bool kScratchPrefill = kN == 16;

// The tiles for rows of C vectors.
template <DType T, int C>
attention::Tiles tiles_of(bool int8) {
  attention::Tiles t;
  if constexpr (T == DType::q8_0) {
    t.decode = &register_tile_q8_0<C>;
#if HWY_TARGET == HWY_AVX3
    if (int8 && (C == 4 || C == 8 || C == 16)) t.decode = &register_tile_q8_0_int8<C>;
#endif
  } else {
    t.decode = &register_tile<T, C, false>;
  }
  (void)int8;
  if constexpr (kScratchPrefill)
    t.prefill = &scratch_tile<T, C>;
  else
    t.prefill = T == DType::q8_0 ? &register_tile_q8_0<C> : &register_tile<T, C, false>;
  return t;
}

// Rows of up to 10 vectors, and head_dim 96, 128 and 256 as whole vectors: what a model has.
template <DType T>
attention::Tiles for_rows(int64_t d, bool int8) {
  // A q8_0 vector lies in one block; a row's last vector is part of one only where masked.
  if ((T == DType::q8_0 || !kPartVectors) && d % kN) return {};
  const int64_t c = (d + kN - 1) / kN;
  switch (c) {
    case 1:
      return tiles_of<T, 1>(int8);
    case 2:
      return tiles_of<T, 2>(int8);
    case 3:
      return tiles_of<T, 3>(int8);
    case 4:
      return tiles_of<T, 4>(int8);
    case 5:
      return tiles_of<T, 5>(int8);
    case 6:
      return tiles_of<T, 6>(int8);
    case 7:
      return tiles_of<T, 7>(int8);
    case 8:
      return tiles_of<T, 8>(int8);
    case 9:
      return tiles_of<T, 9>(int8);
    case 10:
      return tiles_of<T, 10>(int8);
    default:
      break;
  }
  if (d % kN) return {};
  switch (d) {
    case 96:
      return tiles_of<T, 96 / kN>(int8);
    case 128:
      return tiles_of<T, 128 / kN>(int8);
    case 256:
      return tiles_of<T, 256 / kN>(int8);
    default:
      return {};
  }
}

attention::Tiles tiles(DType cache, int64_t d, bool int8) {
  switch (cache) {
    case DType::f32:
      return for_rows<DType::f32>(d, false);
    case DType::f16:
      return for_rows<DType::f16>(d, false);
    case DType::bf16:
      return for_rows<DType::bf16>(d, false);
    case DType::q8_0:
      return for_rows<DType::q8_0>(d, int8);
    default:
      return {};
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace iron::ops::attention_hwy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops::attention {

Tiles vector_tiles(DType cache, int64_t d, bool int8_scores, const cpu::Features& f) {
  auto* tiles = IRON_HWY_PICK(f, attention_hwy, tiles);
  if (!tiles) return {};
  return tiles(cache, d, int8_scores && f.avx512vnni);
}

}  // namespace iron::ops::attention
#endif
