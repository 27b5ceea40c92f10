// The Attention tile (tile.hpp) written once with Highway (devices/cpu/highway.hpp): AVX2 (8 f32
// lanes, 16 registers), AVX-512 (16 lanes) and NEON (4 lanes). Each key and value vector is
// converted from the cache straight into registers and used by up to 3 query vectors at once, in
// blocks of one vector of keys (one vector of scores per query). A prefill tile's dozens of query
// vectors convert each key once per pass of 3 rather than once in all, which costs less than the
// portable tile's scalar conversions (AVX2-only CPUs took the portable loops before this tile's
// first, intrinsics, form: 1.3 GB/s from f16, 0.4 from q8_0, on one core with hot caches).
//
// Where it serves: AVX2 processors, ARM64 ones (SVE processors take the NEON copy: these loops
// keep arrays of vectors, which SVE's sizeless vectors cannot form), and AVX-512 ones for the
// head sizes tile_avx512.cpp has no tile for (that file's tiles take 4 query vectors a pass with
// AVX-512's 32 registers, and int8 scores with VNNI: instructions Highway 1.0.3 does not
// express). A row's vectors are a loop counted at run time, not a template argument: one copy
// per cache type and pass size (12 per target) where one per head size too took minutes to
// compile under the sanitizers.
#include <cstdint>

#include "ops/attention/tile.hpp"

#define HWY_TARGET_INCLUDE "ops/attention/tile_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "devices/cpu/hwy_lanes-inl.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::attention)

// Not built for SVE (see above) nor for Highway's one-lane fallback, which is never picked.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

using D = hn::CappedTag<float, 16>;
using V = hn::Vec<D>;
using D4 = hn::CappedTag<float, 4>;  // one 128-bit block: four keys' scores
using V4 = hn::Vec<D4>;
constexpr int64_t kN = int64_t(hn::MaxLanes(D()));  // lanes, and keys in a block
static_assert(kN % 4 == 0 && kN <= kKeyBlock, "a block of keys is whole groups of four and fits the scratch");
constexpr int kMaxPass = 3;  // query vectors a pass: 12 score sums, a key and a query in 16 registers

// Elements [e, e + kN) of a cache as f32 (e a multiple of kN, so q8_0's lie in one block).
template <DType T>
HWY_INLINE V load(const char* buffer, int64_t e) {
  const D d;
  if constexpr (T != DType::q8_0) {
    return cpu::lanes::HWY_NAMESPACE::LoadF32<T>(d, buffer + e * (T == DType::f32 ? 4 : 2));
  } else {
    static_assert(T == DType::q8_0);
    const char* block = buffer + (e >> 5) * 34;
    const float scale = cpu::lanes::HWY_NAMESPACE::F16At(block);
    const hn::Rebind<int8_t, D> d8;
    const hn::RebindToSigned<D> di;
    const auto q = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(block + 2 + (e & 31))));
    return hn::Mul(hn::ConvertTo(d, q), hn::Set(d, scale));
  }
}

// A vector of `dv` halved until it is one 128-bit block, the halves added.
template <class DV>
HWY_INLINE V4 fold_to_block(DV dv, hn::Vec<DV> v) {
  if constexpr (hn::MaxLanes(dv) == 4) {
    return v;
  } else {
    const hn::Half<DV> dh;
    return fold_to_block(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// Lane j: the sum of the lanes of x[j], for four vectors. Each 128-bit block of the four is
// transposed (interleaves of 32-bit, then 64-bit lanes), so that adding the transposed rows
// sums each vector's lanes j in adjacent pairs, ((0 + 1) + (2 + 3)); then the blocks are added.
// That is the order AVX2's horizontal adds took in this tile's intrinsics form, so the AVX2 copy
// gives that form's bits (medium's int8 rounding downstream turns another order's last bits
// into different logits at a few positions of Gemma 3's reference test).
HWY_INLINE V4 sum4(const V x[4]) {
  const D d;
  const hn::Repartition<double, D> dd;
  const auto ab_lo = hn::BitCast(dd, hn::InterleaveLower(d, x[0], x[1]));  // x0_0 x1_0 x0_1 x1_1
  const auto ab_hi = hn::BitCast(dd, hn::InterleaveUpper(d, x[0], x[1]));  // x0_2 x1_2 x0_3 x1_3
  const auto cd_lo = hn::BitCast(dd, hn::InterleaveLower(d, x[2], x[3]));
  const auto cd_hi = hn::BitCast(dd, hn::InterleaveUpper(d, x[2], x[3]));
  const V t0 = hn::BitCast(d, hn::InterleaveLower(dd, ab_lo, cd_lo));  // x0_0 x1_0 x2_0 x3_0
  const V t1 = hn::BitCast(d, hn::InterleaveUpper(dd, ab_lo, cd_lo));  // x0_1 x1_1 x2_1 x3_1
  const V t2 = hn::BitCast(d, hn::InterleaveLower(dd, ab_hi, cd_hi));
  const V t3 = hn::BitCast(d, hn::InterleaveUpper(dd, ab_hi, cd_hi));
  return fold_to_block(d, hn::Add(hn::Add(t0, t1), hn::Add(t2, t3)));
}

// The sum of v's lanes: the halves added down to four lanes, then lanes 0 + 2 and 1 + 3, then
// those two (AVX2's hsum8 order, as above).
HWY_INLINE float sum_lanes(V v) {
  const D d;
  HWY_ALIGN float f[4];
  hn::Store(fold_to_block(d, v), D4(), f);
  return (f[0] + f[2]) + (f[1] + f[3]);
}

// The vector of `dv` whose 128-bit blocks are part[0], part[1], ... in order.
template <class DV>
HWY_INLINE hn::Vec<DV> join_blocks(DV dv, const V4* part) {
  if constexpr (hn::MaxLanes(dv) == 4) {
    return part[0];
  } else {
    const hn::Half<DV> dh;
    return hn::Combine(dv, join_blocks(dh, part + hn::MaxLanes(dh) / 4), join_blocks(dh, part));
  }
}

// Scores of keys [j0, j0 + kN) of kv head h for B query vectors from m, each row `rows` vectors
// (keys past n repeat key n - 1; the caller masks them): four keys' sums at a time, B * 4
// registers.
template <DType T, int B>
HWY_INLINE void scores(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, int64_t rows, V out[B]) {
  const D d;
  V4 part[B][kN / 4];
  for (int64_t g = 0; g < kN / 4; ++g) {
    int64_t e[4];  // each key's first element of kv head h
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t key = j0 + g * 4 + j;
      e[j] = a.k0 + h * a.d + (key < j0 + n ? key : j0 + n - 1) * a.stride;
    }
    V s[B][4];
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < 4; ++j) s[i][j] = hn::Zero(d);
    for (int64_t c = 0; c < rows; ++c)
      for (int j = 0; j < 4; ++j) {
        const V k = load<T>(a.k, e[j] + c * kN);
        for (int i = 0; i < B; ++i) s[i][j] = hn::MulAdd(k, hn::Load(d, a.q + (m + i) * a.width + c * kN), s[i][j]);
      }
    for (int i = 0; i < B; ++i) part[i][g] = sum4(s[i]);
  }
  for (int i = 0; i < B; ++i) out[i] = join_blocks(d, part[i]);
}

// Adds `Part` vectors from vector c0 of keys [j0, j0 + n)'s value rows of kv head h, weighted by
// `p` (kN per query vector), into the accumulators of B query vectors from m, key by key in
// registers. `Ragged`: only the first `count` of the Part (the row's last, partial chunk).
template <DType T, int B, int Part, bool Ragged>
HWY_INLINE void value_chunk(const Tile& a, int64_t e0, int64_t m, int64_t n, int64_t c0, int count, const float* p) {
  const D d;
  V sum[B][Part];
  for (int i = 0; i < B; ++i)
    for (int c = 0; c < Part; ++c)
      sum[i][c] = !Ragged || c < count ? hn::Load(d, a.acc + (m + i) * a.width + (c0 + c) * kN) : hn::Zero(d);
  for (int64_t j = 0; j < n; ++j) {
    V weight[B];
    for (int i = 0; i < B; ++i) weight[i] = hn::Set(d, p[i * kN + j]);
    for (int c = 0; c < Part; ++c) {
      if (Ragged && c >= count) break;
      const V v = load<T>(a.v, e0 + j * a.stride + (c0 + c) * kN);
      for (int i = 0; i < B; ++i) sum[i][c] = hn::MulAdd(weight[i], v, sum[i][c]);
    }
  }
  for (int i = 0; i < B; ++i)
    for (int c = 0; c < Part && (!Ragged || c < count); ++c) hn::Store(sum[i][c], d, a.acc + (m + i) * a.width + (c0 + c) * kN);
}

// Every value vector of the row, 12 / B at a time.
template <DType T, int B>
HWY_INLINE void values(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, int64_t rows, const float* p) {
  constexpr int Part = 12 / B;
  const int64_t e0 = a.v0 + h * a.d + j0 * a.stride;
  int64_t c0 = 0;
  for (; c0 + Part <= rows; c0 += Part) value_chunk<T, B, Part, false>(a, e0, m, n, c0, Part, p);
  if (c0 < rows) value_chunk<T, B, Part, true>(a, e0, m, n, c0, int(rows - c0), p);
}

// One block of up to kN keys for B query vectors from m of kv head h: scores, the online
// softmax's update (one e^x for the B queries' rescaling), the weighted values.
template <DType T, int B>
void block(const Tile& a, int64_t h, int64_t m, int64_t j0, int64_t n, int64_t rows, const Ahead& ahead) {
  const D d;
  const hn::RebindToSigned<D> di;
  V s[B];
  const int64_t half = (ahead.begin + ahead.end) / 2;
  ahead.fetch(ahead.begin, half);
  scores<T, B>(a, h, m, j0, n, rows, s);
  // kN >= 4 > B: lanes past B are zeros, never used.
  HWY_ALIGN float before[kN] = {}, top[kN] = {}, shrink[kN];
  const auto lane = hn::Iota(di, 0);
  const V minus_inf = hn::Set(d, -__builtin_inff());
  hn::Mask<D> keep[B];
  bool rise = false;
  for (int i = 0; i < B; ++i) {
    const int64_t valid = a.limit[m + i] - j0 < n ? a.limit[m + i] - j0 : n;
    const int64_t first = a.from[m + i] > j0 ? a.from[m + i] - j0 : 0;
    // Keys [first, valid) of the block: below `valid`, and from a sliding window's first on.
    const auto lo = hn::Set(di, int32_t(first < kN ? first : kN)), hi = hn::Set(di, int32_t(valid > 0 ? valid : 0));
    keep[i] = hn::RebindMask(d, hn::And(hn::Not(hn::Lt(lane, lo)), hn::Lt(lane, hi)));
    s[i] = hn::IfThenElse(keep[i], s[i], minus_inf);
    before[i] = a.max[m + i];
    top[i] = valid > first ? hn::GetLane(hn::MaxOfLanes(d, s[i])) : -__builtin_inff();
    rise = rise || top[i] > before[i];
  }
  const int64_t rows_floats = rows * kN;
  if (rise) {
    // e^(before - after) for the queries whose maximum rises (a lane of -inf less -inf is NaN
    // and unused: its maximum does not rise).
    const V b = hn::Load(d, before);
    hn::Store(cpu::lanes::HWY_NAMESPACE::Exp(d, hn::Sub(b, hn::Max(hn::Load(d, top), b))), d, shrink);
    for (int i = 0; i < B; ++i) {
      if (!(top[i] > before[i])) continue;
      a.sum[m + i] *= shrink[i];
      float* acc = a.acc + (m + i) * a.width;
      const V f = hn::Set(d, shrink[i]);
      for (int64_t c = 0; c < rows_floats; c += kN) hn::Store(hn::Mul(hn::Load(d, acc + c), f), d, acc + c);
      a.max[m + i] = top[i];
    }
  }
  float* weights = a.work;
  for (int i = 0; i < B; ++i) {
    // A query with no key kept may hold -inf as its maximum: its lanes (NaN or not) are zeroed.
    const V e = hn::IfThenElseZero(keep[i], cpu::lanes::HWY_NAMESPACE::Exp(d, hn::Sub(s[i], hn::Set(d, a.max[m + i]))));
    a.sum[m + i] += sum_lanes(e);
    hn::Store(e, d, weights + i * kN);
  }
  ahead.fetch(half, ahead.end);
  values<T, B>(a, h, m, j0, n, rows, weights);
}

template <DType T>
void tile(const Tile& a) {
  const int64_t rows = a.d / kN, per = a.queries;
  // Passes of at most 3 query vectors, as even as they go.
  const int64_t passes = (per + kMaxPass - 1) / kMaxPass;
  for (int64_t j0 = a.begin; j0 < a.end; j0 += kN) {
    const int64_t n = a.end - j0 < kN ? a.end - j0 : kN;
    // The next block's rows, whole (every kv head's part) and in order, fetched a share before
    // each kv head's scores and values of this block, as the AVX-512 decode tile does: reading
    // one kv head's part of each row at a time, the hardware prefetcher alone fell behind.
    // SmolLM2's shape (3 kv heads of 64) cold on two threads of a Zen 4 held to AVX2
    // (`IRON_CPU=avx2 build/bench/bench_attention 2 3 cold`, two rounds): f16 7.8-12.2 ->
    // 18.2-23.4 GB/s, bf16 10.0-11.4 -> 14.1-18.5, f32 10.5-12.4 -> 15.2-19.6; one thread f16
    // 5.1-6.5 -> 9.0-13.4. One kv head's rows are read whole and in order, which the hardware
    // follows (Gemma 3's shape: no gain), so there it fetches nothing.
    const Ahead next = a.heads > 1 ? rows_ahead<T>(a, j0 + kN, kN) : Ahead{};
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t pass = 0, m = h * per; pass < passes; ++pass) {
        const int64_t b = (per * (pass + 1)) / passes - (per * pass) / passes;
        // This kv head's share of the lines, on its first pass.
        const Ahead ahead = pass == 0 ? next.share(h, a.heads) : Ahead{};
        switch (b) {
          case 3: block<T, 3>(a, h, m, j0, n, rows, ahead); break;
          case 2: block<T, 2>(a, h, m, j0, n, rows, ahead); break;
          default: block<T, 1>(a, h, m, j0, n, rows, ahead); break;
        }
        m += b;
      }
  }
}

// This target's tile: for head sizes of whole vectors.
TileFn tile_for(DType cache, int64_t d) {
  if (d % kN) return nullptr;
  return for_cache(cache, d, 1, []<DType T>() { return &tile<T>; });
}

#endif  // !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops::attention {

TileFn vector_tile(const cpu::Features& f, DType cache, int64_t d) {
  TileFn t = nullptr;
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
  // The widest copy the processor runs whose vectors divide a row; AVX2's where AVX-512's do not
  // (or where a test build for a processor without AVX-512 left that copy out: IRON_HOST_KERNELS).
#if HWY_TARGETS & HWY_AVX3
  if (cpu::hwy_avx3(f)) t = N_AVX3::tile_for(cache, d);
#endif
  if (!t && cpu::hwy_avx2(f)) t = N_AVX2::tile_for(cache, d);
#elif HWY_ARCH_ARM_A64 && (HWY_TARGETS & HWY_NEON)
  if (f.neon) t = N_NEON::tile_for(cache, d);
#else
  (void)f, (void)cache, (void)d;
#endif
  return t;
}

}  // namespace iron::ops::attention
#endif
