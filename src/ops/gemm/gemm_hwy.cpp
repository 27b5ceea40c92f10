// The matmul loops every vector target shares, written once with Highway (devices/cpu/highway.hpp):
//   GEMV: four rows of W at a time share each load of x (f32, bf16, f16, q8_0, the blocks of 4
//     or 5 bits and the K-quants' super-blocks of 256); GEMV over several rows of x
//     reads each block of W once for all of them, each row's sums those GEMV gives it alone;
//   pack: a tile of W's rows (dequantised to f32 first where they are not) transposed, so the
//     tile reads one row of `kNR` columns per step of k;
//   tiles: kMR rows of a x two vectors of packed W in 2 kMR accumulators.
// Built here for AVX-512 (Highway's AVX3: 16 lanes) and AVX2 (8), which gemm.cpp picks by the
// processor's features; on ARM the NEON copy (neon_isa). Where the two x86 widths chose
// different algorithms they still do, by the width (kTable): nothing else differs.
//
// What stays beside this file, each for an instruction Highway 1.0.3 does not express:
// gemm_avx512.cpp's bf16 tiles (vdpbf16ps) and int8 loops (vpdpbusd), int8_avx2.cpp's
// (vpmaddubsw), int8_avxvnni.cpp's (AVX-VNNI's vpdpbusd), int8_dotprod.cpp's (ARM's sdot; the
// int8 loops share int8_pass.hpp) and gemm_amx.cpp's tiles.
#include <cstdint>
#include <cstring>

#include "ops/gemm/kernels.hpp"

#define HWY_TARGET_INCLUDE "ops/gemm/gemm_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"
#include <hwy/cache_control.h>

#include "devices/cpu/hwy_lanes-inl.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::gemm)

// SVE's vectors have no size at compile time, and these loops keep arrays of accumulators (an
// array of sizeless vectors is not allowed): the SVE copies are not built until an SVE kernel
// is written with named accumulators. No SVE target is picked (devices/cpu/highway.hpp), nor
// Highway's one-lane fallback (its own, with no lanes to shuffle), which is not built either.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

using D = hn::CappedTag<float, 16>;  // 16 lanes at most: a block of 32 is a whole number of vectors
using V = hn::Vec<D>;
constexpr int kN = int(hn::MaxLanes(D()));  // lanes of a vector
constexpr int kNR = 2 * kN;                 // columns of a packed tile
// Rows of a in one tile pass: 2 kMR accumulators, two rows of W and one value of a in registers
// (x86 before AVX-512 has 16 vector registers; AVX-512, NEON and SVE 32).
constexpr int kMR = (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) ? 6 : 8;
// GEMV prefetches the rows this many rows ahead (two groups of four): a single thread reading
// memory-mapped weights is otherwise bound by the latency of its misses, not the bandwidth.
constexpr int64_t kAhead = 8;
// Wide vectors turn a block of 4- or 5-bit quants into its weights through a table of the
// block's 16 (32) values, one lookup a vector (the weights then meet x directly); narrower ones
// convert the quants and meet the block's offset with its sum of x.
constexpr bool kTable = kN >= 16;


HWY_INLINE float half(const char* p) { return cpu::lanes::HWY_NAMESPACE::F16At(p); }

// A block's f16 scale d (the first 2 bytes at p) and, `Minimum`, the f16 m after it, each in
// every lane (m zero without one): both converted at once in a vector of four (the block's
// bytes after them are read and not used), then each broadcast. (Converting them in a whole
// vector and spreading them with DupEven / DupOdd took a 512-bit conversion per block.)
template <bool Minimum>
HWY_INLINE void scales(const char* p, V& d, V& m) {
  const D df;
  const hn::CappedTag<float, 4> d4;
  const hn::Rebind<hwy::float16_t, decltype(d4)> h4;
  const auto four = hn::PromoteTo(d4, hn::LoadU(h4, reinterpret_cast<const hwy::float16_t*>(p)));
  d = hn::Set(df, hn::GetLane(four));
  m = Minimum ? hn::Set(df, hn::GetLane(hn::Shuffle2301(four))) : hn::Zero(df);
}

template <DType T>
constexpr int64_t elem_bytes() {
  return T == DType::f32 ? 4 : 2;
}

// kN values of a float kind from p.
template <DType T>
HWY_INLINE V load_w(const char* p) {
  return cpu::lanes::HWY_NAMESPACE::LoadF32<T>(D(), p);
}
// The first n < kN values, zeros after them: copied out first, so nothing past the n is read
// (the last row of a weight can end its mapping).
template <DType T>
HWY_INLINE V load_w_tail(const char* p, int64_t n) {
  HWY_ALIGN char buffer[kN * 4] = {};
  std::memcpy(buffer, p, size_t(n * elem_bytes<T>()));
  return load_w<T>(buffer);
}

// Quants 32 values of a block of 4 or 5 bits: q4_0 / q5_0 (Q1 false: value (q - 8) d or
// (q - 16) d) and q4_1 / q5_1 (Q1 true: value q d + m); `Fifth`: 4 bytes of fifth bits (bit i:
// element i's) between the header and the nibbles (element i < 16 the low nibble of byte i, the
// others the high nibble of byte i - 16).
template <bool Q1, bool Fifth>
struct Blocks32 {
  static constexpr int64_t kBytes = (Q1 ? 20 : 18) + (Fifth ? 4 : 0), kQuants = kBytes - 16;
  static constexpr float kOffset = Fifth ? -16.0f : -8.0f;  // without a minimum
  // f(v, q) for each vector v of the block's quants (elements v kN .. v kN + kN - 1) as unsigned
  // 32-bit values: each load of kN bytes gives two vectors, its low and its high nibbles.
  template <class F>
  static HWY_INLINE void quants(const char* blk, F&& f) {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint8_t, decltype(du)> d8;
    [[maybe_unused]] uint32_t bits = 0;
    if constexpr (Fifth) std::memcpy(&bits, blk + kQuants - 4, 4);
    // Lane i of vector v meets bit v kN + i, moved to bit 4.
    auto fifth = [&](auto q, int v) {
      if constexpr (!Fifth) return q;
      const auto bit = hn::And(hn::Shr(hn::Set(du, bits >> (v * kN)), hn::Iota(du, 0)), hn::Set(du, 1));
      return hn::Or(q, hn::ShiftLeft<4>(bit));
    };
    for (int v = 0; v < 16 / kN; ++v) {
      const auto bytes = hn::PromoteTo(du, hn::LoadU(d8, reinterpret_cast<const uint8_t*>(blk + kQuants + v * kN)));
      f(v, fifth(hn::And(bytes, hn::Set(du, 0x0f)), v));
      f(v + 16 / kN, fifth(hn::ShiftRight<4>(bytes), v + 16 / kN));
    }
  }
  // The same as f32 values.
  template <class F>
  static HWY_INLINE void quants_f(const char* blk, F&& f) {
    const D d;
    quants(blk, [&](int v, auto q) { f(v, hn::ConvertTo(d, hn::BitCast(hn::RebindToSigned<D>(), q))); });
  }
};

// kTable: a block's weights as f32, the values to_f32 gives them (d q + m, or d (q - 8) /
// d (q - 16)), from a table of the kind's 16 (32 with a fifth bit) values for this block's d and
// m: d q is exact in f32 (an f16 d times a 4- or 5-bit q), so each entry is the dequantised weight
// rounded once, as to_f32 rounds it. `f(v, weights)` for each vector of 16.
template <bool Q1, bool Fifth, class F>
HWY_INLINE void weights32(const char* blk, F&& f) {
  using B = Blocks32<Q1, Fifth>;
  const D d;
  const hn::RebindToSigned<D> di;
  V dv, m;
  scales<Q1>(blk, dv, m);
  const V values = hn::Iota(d, Q1 ? 0.0f : B::kOffset);  // the quants' values, less 8 (16) without a minimum
  auto table = [&](V v) { return Q1 ? hn::MulAdd(v, dv, m) : hn::Mul(v, dv); };
  const V t0 = table(values);
  if constexpr (!Fifth) {
    B::quants(blk, [&](int v, auto q) { f(v, hn::TableLookupLanes(t0, hn::IndicesFromVec(d, hn::BitCast(di, q)))); });
  } else {
    const V t1 = table(hn::Add(values, hn::Set(d, 16.0f)));
    const hn::RebindToUnsigned<D> du;
    B::quants(blk, [&](int v, auto q) {
      const auto low = hn::IndicesFromVec(d, hn::BitCast(di, hn::And(q, hn::Set(du, 15))));
      const auto high = hn::RebindMask(d, hn::TestBit(q, hn::Set(du, 16)));
      f(v, hn::IfThenElse(high, hn::TableLookupLanes(t1, low), hn::TableLookupLanes(t0, low)));
    });
  }
}

// The sums of each 32 values of x (blocks of 4 or 5 bits without the table meet their offsets
// with them).
void block_sums(const float* x, int64_t k, float* xsum) {
  const D d;
  for (int64_t b = 0; b < k / 32; ++b) {
    V s = hn::LoadU(d, x + b * 32);
    for (int e = kN; e < 32; e += kN) s = hn::Add(s, hn::LoadU(d, x + b * 32 + e));
    xsum[b] = hn::GetLane(hn::SumOfLanes(d, s));
  }
}

// ---- the K-quants (q4_k, q5_k, q6_k) ------------------------------------------------------
// A super-block of 256 weights is 8 sub-blocks of 32, each 32 signed quants q with
// w_i = scale_(i / 16) q_i + offset (the two scales differ only for q6_k, whose scales cover 16
// weights each). A sub-block's quants are decoded with byte operations into one vector of 32
// int8 (two on NEON), each slice of kN of them then widened to f32 lanes. Then
//   GEMV: sum_i w_i x_i = scale * sum_i q_i x_i + offset * sum_i x_i, the offsets meeting the
//     sub-blocks' sums of x (block_sums);
//   the tile path's rows: w_i as f32 (dequantise), then the f32 tiles.
// (medium's int8 path reads them rearranged: kernels.hpp, packed_int8.cpp.) Everything stays
// in registers: quants stored and reloaded as narrower slices, and scale bytes assembled in
// memory from words, cost this loop 15% on AVX2 (loads that a wider store must forward).

using DQ = hn::CappedTag<uint8_t, 32>;  // a sub-block's 32 quants in one vector, or two (NEON)
using QV = hn::Vec<DQ>;
using D8 = hn::CappedTag<float, 8>;  // a super-block's 8 offsets or sums of x
constexpr int kQ = int(hn::MaxLanes(DQ()));

/// Lanes [N i, N i + N) of v, halving the vector until N lanes are left (i a constant once the
/// callers' loops are unrolled).
template <size_t N, class DB>
HWY_INLINE auto slice(DB db, hn::Vec<DB> v, int i) {
  if constexpr (hn::MaxLanes(db) == N) {
    return v;
  } else {
    const hn::Half<DB> dh;
    constexpr int kHalf = int(hn::MaxLanes(db) / N / 2);  // slices in a half
    return i < kHalf ? slice<N>(dh, hn::LowerHalf(dh, v), i) : slice<N>(dh, hn::UpperHalf(dh, v), i - kHalf);
  }
}

/// A super-block's scales and offsets: weight i of sub-block s is scale[s] q_i + offset[s], or
/// with kHalves scale[2 s + i / 16] q_i (offsets are set only for kinds with kOffset).
struct KScales {
  HWY_ALIGN float scale[16];
  HWY_ALIGN float offset[8];
  template <class K>
  HWY_INLINE float first(int s) const { return scale[K::kHalves ? 2 * s : s]; }
  template <class K>
  HWY_INLINE float second(int s) const { return scale[K::kHalves ? 2 * s + 1 : s]; }
};

/// The bytes of `bytes` (little-endian) as f32 times `by`, into out[0..8).
HWY_INLINE void bytes_times(uint64_t bytes, float by, float* out) {
  const D8 d;
  const hn::CappedTag<uint8_t, 8> d8;
  const auto v = hn::BitCast(d8, hn::Set(hn::CappedTag<uint64_t, 1>(), bytes));
  constexpr int kLanes = int(hn::MaxLanes(d));
  for (int i = 0; i < 8 / kLanes; ++i)
    hn::Store(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(hn::RebindToSigned<D8>(), slice<kLanes>(d8, v, i))), hn::Set(d, by)),
              d, out + i * kLanes);
}

// Each kind: kBytes of a super-block, kOffset (whether any offset is nonzero), kHalves (whether
// the two scales of a sub-block differ); scales() the super-block's, quants() sub-block j's 32
// quants (as unsigned bytes whose bits are the int8 values).

// q4_k and q5_k (Fifth): f16 d, f16 dmin, 12 bytes of 6-bit scales and minimums (dtype.cpp),
// (q5_k) 32 bytes of fifth bits (byte l, bit j: element l of sub-block j), 128 bytes of nibbles
// (sub-blocks 2p and 2p + 1 the low and high nibbles of bytes 32p .. 32p + 31);
// w = d scale_j q - dmin minimum_j.
template <bool Fifth>
struct KBlocks {
  static constexpr int64_t kBytes = Fifth ? 176 : 144;
  static constexpr bool kOffset = true, kHalves = false;
  static HWY_INLINE void scales(const char* b, KScales& s) {
    // k_scale_min for all 8 sub-blocks at once, 4 bytes to a word: scales and minimums 0-3 are
    // the low 6 bits of words 0 and 1; 4-7 a nibble of word 2 under the top 2 bits of 0 and 1.
    uint32_t w[3];
    std::memcpy(w, b + 4, 12);
    const uint32_t six = 0x3f3f3f3f, nibble = 0x0f0f0f0f, top = 0x30303030;
    const uint64_t scale = (w[0] & six) | uint64_t((w[2] & nibble) | ((w[0] >> 2) & top)) << 32;
    const uint64_t minimum = (w[1] & six) | uint64_t(((w[2] >> 4) & nibble) | ((w[1] >> 2) & top)) << 32;
    bytes_times(scale, half(b), s.scale);
    bytes_times(minimum, -half(b + 2), s.offset);
  }
  static HWY_INLINE void quants(const char* b, int j, QV* q) {
    const DQ d;
    const auto* nibbles = reinterpret_cast<const uint8_t*>(b + (Fifth ? 48 : 16) + 32 * (j / 2));
    for (int i = 0; i < 32 / kQ; ++i) {
      const QV v = hn::LoadU(d, nibbles + i * kQ);
      q[i] = hn::And(j % 2 ? hn::ShiftRight<4>(v) : v, hn::Set(d, 0x0f));
      if constexpr (Fifth) {
        const QV fifth = hn::LoadU(d, reinterpret_cast<const uint8_t*>(b + 16) + i * kQ);
        q[i] = hn::Or(q[i], hn::IfThenElseZero(hn::TestBit(fifth, hn::Set(d, uint8_t(1u << j))), hn::Set(d, 0x10)));
      }
    }
  }
};

// q6_k: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales (one per 16
// weights), f16 d; w = d scale (q - 32). Sub-block j = 4h + c (h a half of 128 weights) takes
// low nibbles (c < 2) or high ones of bytes 64h + 32 (c % 2) .., and bits 2c, 2c + 1 of bytes
// 128 + 32h ..; its scales are 8h + 2c and 8h + 2c + 1, which is 2j and 2j + 1: the bytes' order.
struct Q6KBlocks {
  static constexpr int64_t kBytes = 210;
  static constexpr bool kOffset = false, kHalves = true;
  static HWY_INLINE void scales(const char* b, KScales& s) {
    const D8 d;
    const hn::Rebind<int8_t, D8> d8;
    const float dd = half(b + 208);
    for (int i = 0; i < 16; i += int(hn::Lanes(d))) {
      const auto bytes = hn::LoadU(d8, reinterpret_cast<const int8_t*>(b + 192 + i));
      hn::Store(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(hn::RebindToSigned<D8>(), bytes)), hn::Set(d, dd)), d, s.scale + i);
    }
  }
  static HWY_INLINE void quants(const char* b, int j, QV* q) {
    const DQ d;
    const hn::Repartition<uint16_t, DQ> d16;
    const int h = j / 4, c = j % 4;
    const auto* low = reinterpret_cast<const uint8_t*>(b + 64 * h + 32 * (c % 2));
    const auto* high = reinterpret_cast<const uint8_t*>(b + 128 + 32 * h);
    for (int i = 0; i < 32 / kQ; ++i) {
      const QV l = hn::LoadU(d, low + i * kQ);
      const QV lo = hn::And(c < 2 ? l : hn::ShiftRight<4>(l), hn::Set(d, 0x0f));
      // Shifted as 16-bit lanes: the bits that cross into a byte from its neighbour are masked
      // off with the rest (Highway's 8-bit shift would mask them once more).
      const QV hi = hn::And(hn::BitCast(d, hn::ShiftRightSame(hn::BitCast(d16, hn::LoadU(d, high + i * kQ)), 2 * c)),
                            hn::Set(d, 0x03));
      // q - 32 wraps in the unsigned bytes; read as int8 it is the signed value.
      q[i] = hn::Sub(hn::Or(lo, hn::ShiftLeft<4>(hi)), hn::Set(d, 32));
    }
  }
};

/// Calls fn(Kind{}) with the kind of `t`; false for a kind that is not a K-quant these take.
template <class Fn>
bool with_k_quant(DType t, Fn&& fn) {
  switch (t) {
    case DType::q4_k:
      return fn(KBlocks<false>{}), true;
    case DType::q5_k:
      return fn(KBlocks<true>{}), true;
    case DType::q6_k:
      return fn(Q6KBlocks{}), true;
    default:
      return false;
  }
}

// Quants c kN .. c kN + kN - 1 of a sub-block as f32.
HWY_INLINE V k_vector(const QV* q, int c) {
  const D d;
  const auto bytes = slice<size_t(kN)>(DQ(), q[c * kN / kQ], c % (kQ / kN));
  const hn::Rebind<int8_t, D> d8;
  return hn::ConvertTo(d, hn::PromoteTo(hn::RebindToSigned<D>(), hn::BitCast(d8, bytes)));
}

// acc + (the first 16 quants times x) s0 + (the other 16 times x) s1 (Halves false: s0 == s1):
// each half summed in its own chain first. `quant(c)`: vector c of the quants as f32 (converted
// here, or once for several rows of x: the same operations either way).
template <bool Halves, class Quant>
HWY_INLINE V k_times(Quant&& quant, const float* x, float s0, float s1, V acc) {
  const D d;
  constexpr int kHalf = 16 / kN;  // vectors in a half
  V lo = hn::Mul(quant(0), hn::LoadU(d, x));
  V hi = hn::Mul(quant(kHalf), hn::LoadU(d, x + 16));
  for (int c = 1; c < kHalf; ++c) {
    lo = hn::MulAdd(quant(c), hn::LoadU(d, x + c * kN), lo);
    hi = hn::MulAdd(quant(kHalf + c), hn::LoadU(d, x + 16 + c * kN), hi);
  }
  if constexpr (!Halves) return hn::MulAdd(hn::Add(lo, hi), hn::Set(d, s0), acc);
  return hn::MulAdd(hi, hn::Set(d, s1), hn::MulAdd(lo, hn::Set(d, s0), acc));
}

template <class K, int R>
void k_gemv_rows(const GemvArgs& g, const char* w, float* y) {
  const D d;
  const D8 d8;
  constexpr int k8 = int(hn::MaxLanes(D8()));
  V acc[R];
  hn::Vec<D8> corr[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d), corr[r] = hn::Zero(d8);
  for (int64_t b = 0; b < g.k / 256; ++b) {
    const char* blk[R];
    KScales sc[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w + r * g.row_bytes + b * K::kBytes;
      for (int64_t line = 0; line < K::kBytes; line += 64) hwy::Prefetch(blk[r] + kAhead * g.row_bytes + line);
      K::scales(blk[r], sc[r]);
      // The super-block's 8 offsets times x's sums of its 8 sub-blocks.
      if constexpr (K::kOffset)
        for (int i = 0; i < 8; i += k8)
          corr[r] = hn::MulAdd(hn::Load(d8, sc[r].offset + i), hn::LoadU(d8, g.xsum + 8 * b + i), corr[r]);
    }
    for (int s = 0; s < 8; ++s) {
      const float* x = g.x + b * 256 + 32 * s;
      for (int r = 0; r < R; ++r) {
        QV q[32 / kQ];
        K::quants(blk[r], s, q);
        acc[r] = k_times<K::kHalves>([&](int c) { return k_vector(q, c); }, x, sc[r].template first<K>(s),
                                     sc[r].template second<K>(s), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    y[r] = hn::GetLane(hn::SumOfLanes(d, acc[r])) + hn::GetLane(hn::SumOfLanes(d8, corr[r]));
}

// The GEMV of a K-quant (false for another kind): four rows at a time share each load of x.
bool k_gemv(const GemvArgs& g) {
  return with_k_quant(g.dtype, [&](auto kind) {
    using K = decltype(kind);
    if constexpr (K::kOffset) block_sums(g.x, g.k, g.xsum);
    int64_t r = 0;
    for (; r + 4 <= g.rows; r += 4) k_gemv_rows<K, 4>(g, g.w + r * g.row_bytes, g.y + r);
    for (; r < g.rows; ++r) k_gemv_rows<K, 1>(g, g.w + r * g.row_bytes, g.y + r);
  });
}

// One row of W (k weights) of a K-quant as f32 (false for another kind).
bool k_dequantise(DType t, const char* w, int64_t k, float* out) {
  return with_k_quant(t, [&](auto kind) {
    using K = decltype(kind);
    const D d;
    for (int64_t b = 0; b < k / 256; ++b, w += K::kBytes) {
      KScales sc;
      K::scales(w, sc);
      for (int s = 0; s < 8; ++s, out += 32) {
        QV q[32 / kQ];
        K::quants(w, s, q);
        const V o = hn::Set(d, K::kOffset ? sc.offset[s] : 0.0f);
        for (int c = 0; c < 32 / kN; ++c) {
          const float scale = c < 16 / kN ? sc.template first<K>(s) : sc.template second<K>(s);
          hn::StoreU(hn::MulAdd(k_vector(q, c), hn::Set(d, scale), o), d, out + c * kN);
        }
      }
    }
  });
}

// ---- GEMV ---------------------------------------------------------------------------------
// Each kind's step over one block (or vector) of a row of W and x, shared by gemv (several rows
// of W against one x) and gemv_many (one row of W against several x), so that both give a row
// the same operations in the same order: a row's outputs are the same bits either way.

// q8_0: the block's 32 quants times x, then scaled by d.
struct Q8Block {
  V q[32 / kN];
  V d;
  HWY_INLINE explicit Q8Block(const char* blk) {
    const D df;
    const hn::RebindToSigned<D> di;
    const hn::Rebind<int8_t, D> d8;
    for (int v = 0; v < 32 / kN; ++v)
      q[v] = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(blk + 2 + v * kN))));
    V zero;
    scales<false>(blk, d, zero);
  }
  HWY_INLINE V times(const float* x, V acc) const {
    const D df;
    V t = hn::Mul(q[0], hn::LoadU(df, x));
    for (int v = 1; v < 32 / kN; ++v) t = hn::MulAdd(q[v], hn::LoadU(df, x + v * kN), t);
    return hn::MulAdd(t, d, acc);
  }
};

// A block of 4 or 5 bits: with the table, its weights meet x directly; else its quants do,
// scaled by d, and the offset m (or -8 d, -16 d) meets x's block sum (`corr`).
template <bool Q1, bool Fifth>
struct Q4Block {
  using B = Blocks32<Q1, Fifth>;
  V w[32 / kN];
  V d;
  float offset = 0;
  HWY_INLINE explicit Q4Block(const char* blk) {
    const D df;
    if constexpr (kTable) {
      weights32<Q1, Fifth>(blk, [&](int v, V weights) { w[v] = weights; });
    } else {
      B::quants_f(blk, [&](int v, V q) { w[v] = q; });
      const float dd = half(blk);
      d = hn::Set(df, dd);
      offset = Q1 ? half(blk + 2) : B::kOffset * dd;
    }
  }
  HWY_INLINE V times(const float* x, float xs, V acc, float& corr) const {
    const D df;
    if constexpr (kTable) {
      for (int v = 0; v < 32 / kN; ++v) acc = hn::MulAdd(w[v], hn::LoadU(df, x + v * kN), acc);
      return acc;
    } else {
      V t = hn::Mul(w[0], hn::LoadU(df, x));
      for (int v = 1; v < 32 / kN; ++v) t = hn::MulAdd(w[v], hn::LoadU(df, x + v * kN), t);
      corr += offset * xs;
      return hn::MulAdd(t, d, acc);
    }
  }
};

template <DType T, int R>
void gemv_float(const GemvArgs& g, const char* w, float* y) {
  const D d;
  V acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  int64_t i = 0;
  for (; i + kN <= g.k; i += kN) {
    const V x = hn::LoadU(d, g.x + i);
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(load_w<T>(w + r * g.row_bytes + i * elem_bytes<T>()), x, acc[r]);
  }
  if (i < g.k) {
    const V x = load_w_tail<DType::f32>(reinterpret_cast<const char*>(g.x + i), g.k - i);
    for (int r = 0; r < R; ++r)
      acc[r] = hn::MulAdd(load_w_tail<T>(w + r * g.row_bytes + i * elem_bytes<T>(), g.k - i), x, acc[r]);
  }
  for (int r = 0; r < R; ++r) y[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
}

template <int R>
void gemv_q8_0(const GemvArgs& g, const char* w, float* y) {
  const D d;
  V acc[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  for (int64_t b = 0; b < g.k / 32; ++b)
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * 34;
      hwy::Prefetch(blk + kAhead * g.row_bytes);
      acc[r] = Q8Block(blk).times(g.x + b * 32, acc[r]);
    }
  for (int r = 0; r < R; ++r) y[r] = hn::GetLane(hn::SumOfLanes(d, acc[r]));
}

template <bool Q1, bool Fifth, int R>
void gemv_q4(const GemvArgs& g, const char* w, float* y) {
  using B = Blocks32<Q1, Fifth>;
  const D d;
  V acc[R];
  float corr[R];
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d), corr[r] = 0;
  for (int64_t b = 0; b < g.k / 32; ++b)
    for (int r = 0; r < R; ++r) {
      const char* blk = w + r * g.row_bytes + b * B::kBytes;
      hwy::Prefetch(blk + kAhead * g.row_bytes);
      acc[r] = Q4Block<Q1, Fifth>(blk).times(g.x + b * 32, kTable ? 0.0f : g.xsum[b], acc[r], corr[r]);
    }
  for (int r = 0; r < R; ++r) y[r] = hn::GetLane(hn::SumOfLanes(d, acc[r])) + corr[r];
}

template <int R>
void gemv_rows(const GemvArgs& g, const char* w, float* y) {
  switch (g.dtype) {
    case DType::f32:
      return gemv_float<DType::f32, R>(g, w, y);
    case DType::bf16:
      return gemv_float<DType::bf16, R>(g, w, y);
    case DType::f16:
      return gemv_float<DType::f16, R>(g, w, y);
    case DType::q8_0:
      return gemv_q8_0<R>(g, w, y);
    default:
      with_blocks32(g.dtype, [&](auto q1, auto fifth) { gemv_q4<q1, fifth, R>(g, w, y); });
      return;
  }
}

void gemv(const GemvArgs& g) {
  if (k_gemv(g)) return;
  if (!kTable && with_blocks32(g.dtype, [](auto, auto) {})) block_sums(g.x, g.k, g.xsum);
  int64_t r = 0;
  for (; r + 4 <= g.rows; r += 4) gemv_rows<4>(g, g.w + r * g.row_bytes, g.y + r);
  for (; r < g.rows; ++r) gemv_rows<1>(g, g.w + r * g.row_bytes, g.y + r);
}

// ---- GEMV over several rows of x (a batched decode step at highest) -----------------------
// One row of W at a time: each block is loaded and converted once, then meets every row of x
// through the same step gemv takes, into that row's own accumulators.

template <DType T, int M>
void many_float(const GemvManyArgs& g) {
  const D d;
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* w = g.w + r * g.row_bytes;
    V acc[M];
    for (int m = 0; m < M; ++m) acc[m] = hn::Zero(d);
    int64_t i = 0;
    for (; i + kN <= g.k; i += kN) {
      const V wv = load_w<T>(w + i * elem_bytes<T>());
      for (int m = 0; m < M; ++m) acc[m] = hn::MulAdd(wv, hn::LoadU(d, g.x + m * g.ldx + i), acc[m]);
    }
    if (i < g.k) {
      const V wv = load_w_tail<T>(w + i * elem_bytes<T>(), g.k - i);
      for (int m = 0; m < M; ++m)
        acc[m] = hn::MulAdd(wv, load_w_tail<DType::f32>(reinterpret_cast<const char*>(g.x + m * g.ldx + i), g.k - i), acc[m]);
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = hn::GetLane(hn::SumOfLanes(d, acc[m]));
  }
}

template <int M>
void many_q8_0(const GemvManyArgs& g) {
  const D d;
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* row = g.w + r * g.row_bytes;
    V acc[M];
    for (int m = 0; m < M; ++m) acc[m] = hn::Zero(d);
    for (int64_t b = 0; b < g.k / 32; ++b) {
      const char* blk = row + b * 34;
      hwy::Prefetch(blk + kAhead * g.row_bytes);
      const Q8Block block(blk);
      for (int m = 0; m < M; ++m) acc[m] = block.times(g.x + m * g.ldx + b * 32, acc[m]);
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = hn::GetLane(hn::SumOfLanes(d, acc[m]));
  }
}

template <bool Q1, bool Fifth, int M>
void many_q4(const GemvManyArgs& g) {
  using B = Blocks32<Q1, Fifth>;
  const D d;
  const int64_t blocks = g.k / 32;
  if constexpr (!kTable)
    for (int m = 0; m < M; ++m) block_sums(g.x + m * g.ldx, g.k, g.xsum + m * blocks);
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* row = g.w + r * g.row_bytes;
    V acc[M];
    float corr[M];
    for (int m = 0; m < M; ++m) acc[m] = hn::Zero(d), corr[m] = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const char* blk = row + b * B::kBytes;
      hwy::Prefetch(blk + kAhead * g.row_bytes);
      const Q4Block<Q1, Fifth> block(blk);
      for (int m = 0; m < M; ++m)
        acc[m] = block.times(g.x + m * g.ldx + b * 32, kTable ? 0.0f : g.xsum[m * blocks + b], acc[m], corr[m]);
    }
    for (int m = 0; m < M; ++m) g.y[m * g.ldy + r] = hn::GetLane(hn::SumOfLanes(d, acc[m])) + corr[m];
  }
}

// The K-quants: each super-block's scales read, and each sub-block's quants decoded and
// converted, once for every row of x; each row's steps those of k_gemv_rows.
template <class K, int M>
void many_k(const GemvManyArgs& g) {
  const D d;
  const D8 d8;
  constexpr int k8 = int(hn::MaxLanes(D8()));
  const int64_t blocks = g.k / 32;
  if constexpr (K::kOffset)
    for (int m = 0; m < M; ++m) block_sums(g.x + m * g.ldx, g.k, g.xsum + m * blocks);
  for (int64_t r = 0; r < g.rows; ++r) {
    const char* row = g.w + r * g.row_bytes;
    V acc[M];
    hn::Vec<D8> corr[M];
    for (int m = 0; m < M; ++m) acc[m] = hn::Zero(d), corr[m] = hn::Zero(d8);
    for (int64_t b = 0; b < g.k / 256; ++b) {
      const char* blk = row + b * K::kBytes;
      for (int64_t line = 0; line < K::kBytes; line += 64) hwy::Prefetch(blk + kAhead * g.row_bytes + line);
      KScales sc;
      K::scales(blk, sc);
      if constexpr (K::kOffset)
        for (int m = 0; m < M; ++m)
          for (int i = 0; i < 8; i += k8)
            corr[m] = hn::MulAdd(hn::Load(d8, sc.offset + i), hn::LoadU(d8, g.xsum + m * blocks + 8 * b + i), corr[m]);
      for (int s = 0; s < 8; ++s) {
        QV q[32 / kQ];
        K::quants(blk, s, q);
        V qf[32 / kN];
        for (int c = 0; c < 32 / kN; ++c) qf[c] = k_vector(q, c);
        for (int m = 0; m < M; ++m)
          acc[m] = k_times<K::kHalves>([&](int c) { return qf[c]; }, g.x + m * g.ldx + b * 256 + 32 * s,
                                       sc.template first<K>(s), sc.template second<K>(s), acc[m]);
      }
    }
    for (int m = 0; m < M; ++m)
      g.y[m * g.ldy + r] = hn::GetLane(hn::SumOfLanes(d, acc[m])) + hn::GetLane(hn::SumOfLanes(d8, corr[m]));
  }
}

template <int M>
bool many_rows(const GemvManyArgs& g) {
  switch (g.dtype) {
    case DType::f32:
      return many_float<DType::f32, M>(g), true;
    case DType::bf16:
      return many_float<DType::bf16, M>(g), true;
    case DType::f16:
      return many_float<DType::f16, M>(g), true;
    case DType::q8_0:
      return many_q8_0<M>(g), true;
    default:
      return with_k_quant(g.dtype, [&](auto kind) { many_k<decltype(kind), M>(g); }) ||
             with_blocks32(g.dtype, [&](auto q1, auto fifth) { many_q4<q1, fifth, M>(g); });
  }
}

// One row is gemv()'s own call (the caller takes gemv_many for two rows or more).
bool gemv_many(const GemvManyArgs& g) {
  switch (g.m) {
    case 2:
      return many_rows<2>(g);
    case 3:
      return many_rows<3>(g);
    case 4:
      return many_rows<4>(g);
    case 5:
      return many_rows<5>(g);
    case 6:
      return many_rows<6>(g);
    case 7:
      return many_rows<7>(g);
    case 8:
      return many_rows<8>(g);
    default:
      return false;
  }
}

// ---- packing ------------------------------------------------------------------------------

// One row of W (k values) as f32.
void dequantise(DType t, const char* w, int64_t k, float* out) {
  if (k_dequantise(t, w, k, out)) return;
  const D d;
  auto floats = [&](auto kind) {
    constexpr DType T = decltype(kind)::value;
    int64_t i = 0;
    for (; i + kN <= k; i += kN) hn::StoreU(load_w<T>(w + i * elem_bytes<T>()), d, out + i);
    if (i < k) {
      HWY_ALIGN float tail[kN];
      hn::Store(load_w_tail<T>(w + i * elem_bytes<T>(), k - i), d, tail);
      std::memcpy(out + i, tail, size_t(k - i) * 4);
    }
  };
  switch (t) {
    case DType::bf16:
      return floats(std::integral_constant<DType, DType::bf16>{});
    case DType::f16:
      return floats(std::integral_constant<DType, DType::f16>{});
    case DType::q8_0:
      for (int64_t b = 0; b < k / 32; ++b, w += 34, out += 32) {
        const Q8Block block(w);
        for (int v = 0; v < 32 / kN; ++v) hn::StoreU(hn::Mul(block.q[v], block.d), d, out + v * kN);
      }
      return;
    default:
      with_blocks32(t, [&](auto q1, auto fifth) {
        using B = Blocks32<q1, fifth>;
        for (int64_t b = 0; b < k / 32; ++b, w += B::kBytes, out += 32) {
          const float dd = half(w);
          const V dv = hn::Set(d, dd), m = hn::Set(d, q1 ? half(w + 2) : B::kOffset * dd);
          B::quants_f(w, [&](int v, V q) { hn::StoreU(hn::MulAdd(q, dv, m), d, out + v * kN); });
        }
      });
      return;
  }
}

// dst[j * ld + i] = src[i][k0 + j] for i, j < kN: 4 x 4 transposes inside each 128-bit block,
// then the blocks transposed (2 x 2 on AVX2, 4 x 4 on AVX-512). (A template, N = kN, so that
// only the width's own branch is built.)
template <int N>
void transpose(const float* const* src, int64_t k0, float* dst, int64_t ld) {
  const D d;
  const hn::Repartition<double, D> dd;
  constexpr int kGroups = N / 4;  // of four rows; also blocks of a vector
  // u[g][c], block b: rows 4g .. 4g + 3 at k0 + 4b + c.
  V u[kGroups][4];
  for (int g = 0; g < kGroups; ++g) {
    const V r0 = hn::LoadU(d, src[4 * g] + k0), r1 = hn::LoadU(d, src[4 * g + 1] + k0);
    const V r2 = hn::LoadU(d, src[4 * g + 2] + k0), r3 = hn::LoadU(d, src[4 * g + 3] + k0);
    const auto a = hn::BitCast(dd, hn::InterleaveLower(d, r0, r1)), b = hn::BitCast(dd, hn::InterleaveUpper(d, r0, r1));
    const auto c = hn::BitCast(dd, hn::InterleaveLower(d, r2, r3)), e = hn::BitCast(dd, hn::InterleaveUpper(d, r2, r3));
    u[g][0] = hn::BitCast(d, hn::InterleaveLower(dd, a, c));
    u[g][1] = hn::BitCast(d, hn::InterleaveUpper(dd, a, c));
    u[g][2] = hn::BitCast(d, hn::InterleaveLower(dd, b, e));
    u[g][3] = hn::BitCast(d, hn::InterleaveUpper(dd, b, e));
  }
  for (int c = 0; c < 4; ++c) {
    if constexpr (kGroups == 1) {
      hn::Store(u[0][c], d, dst + c * ld);
    } else {
      // Blocks of adjacent groups paired: x0 = (u0 b0, u1 b0, u0 b2, u1 b2), x1 = (u0 b1, u1 b1, ...).
      auto pair = [&](int g, V& x0, V& x1) {
        x0 = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(u[g + 1][c]), u[g][c]);
        x1 = hn::OddEvenBlocks(u[g + 1][c], hn::SwapAdjacentBlocks(u[g][c]));
      };
      V x0, x1;
      pair(0, x0, x1);
      if constexpr (kGroups == 2) {
        hn::Store(x0, d, dst + c * ld);
        hn::Store(x1, d, dst + (4 + c) * ld);
      } else {
        static_assert(kGroups == 4, "vectors of 4, 8 or 16 lanes");
        V y0, y1;
        pair(2, y0, y1);
        hn::Store(hn::ConcatLowerLower(d, y0, x0), d, dst + c * ld);
        hn::Store(hn::ConcatLowerLower(d, y1, x1), d, dst + (4 + c) * ld);
        hn::Store(hn::ConcatUpperUpper(d, y0, x0), d, dst + (8 + c) * ld);
        hn::Store(hn::ConcatUpperUpper(d, y1, x1), d, dst + (12 + c) * ld);
      }
    }
  }
}

void pack(const PackArgs& p) {
  const float* src[kNR];
  for (int j = 0; j < kNR; ++j) {
    if (j >= p.rows) {
      src[j] = p.zeros;
    } else if (p.dtype == DType::f32) {
      src[j] = reinterpret_cast<const float*>(p.w + j * p.row_bytes);
    } else {
      dequantise(p.dtype, p.w + j * p.row_bytes, p.k, p.rowbuf + j * p.k);
      src[j] = p.rowbuf + j * p.k;
    }
  }
  int64_t k0 = 0;
  for (; k0 + kN <= p.k; k0 += kN)
    for (int h = 0; h < 2; ++h) transpose<kN>(src + kN * h, k0, p.packed + k0 * kNR + kN * h, kNR);
  for (; k0 < p.k; ++k0)
    for (int j = 0; j < kNR; ++j) p.packed[k0 * kNR + j] = src[j][k0];
}

// ---- tiles --------------------------------------------------------------------------------

// W's vectors for the tile loops, a step of k at a time: fn(kk, b0, b1) with row kk's 2 kN
// columns. The f32 tiles as pack() lays them out, one row a step.
struct F32Rows {
  const float* packed;
  int64_t steps;  // k
  template <class Fn>
  void step(int64_t kk, Fn&& fn) const {
    const D d;
    fn(kk, hn::Load(d, packed + kk * kNR), hn::Load(d, packed + kk * kNR + kN));
  }
};
// Medium's bf16 pairs where bf16 products do not outrun f32 FMAs, two rows a step: W in half the
// f32 tiles' bytes (what bounds a short sentence's matmuls, whose weights come from memory once
// a call), widened in registers. A pair's 32-bit lane j holds column j's value of row 2q in its
// low half and of row 2q + 1 in its high half, so shifting it left by 16 gives the first as f32
// and clearing its low half the second. Each half is loaded where it is used: the two vectors of
// pairs held across both rows, beside the 2 MR accumulators, would pass AVX2's 16 registers.
struct Bf16Pairs {
  const uint16_t* packed;
  int64_t steps;  // pairs
  template <class Fn>
  void step(int64_t q, Fn&& fn) const {
    const D d;
    const hn::RebindToUnsigned<D> du;
    const auto* p = reinterpret_cast<const uint32_t*>(packed) + q * kNR;
    fn(2 * q, hn::BitCast(d, hn::ShiftLeft<16>(hn::Load(du, p))), hn::BitCast(d, hn::ShiftLeft<16>(hn::Load(du, p + kN))));
    const auto high = hn::Set(du, 0xffff0000u);
    fn(2 * q + 1, hn::BitCast(d, hn::And(hn::Load(du, p), high)), hn::BitCast(d, hn::And(hn::Load(du, p + kN), high)));
  }
};

// MR rows of a times W's 2 kN columns into c: 2 MR accumulators, the same order of sums whatever
// W's source, so the widened pairs give the bits the f32 tile gives over the same values.
// The accumulators stay in registers only when the loops over r are unrolled before GCC splits
// the arrays into scalars: without the pragmas it kept them in registers and also stored all of
// them to the stack every step of kk, which halved the tile's speed (objdump showed the stores).
template <int MR, class W>
void tile_rows(const W& w, const float* a, int64_t lda, float* c, int64_t ldc) {
  const D d;
  V c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) c0[r] = hn::Zero(d), c1[r] = hn::Zero(d);
  for (int64_t s = 0; s < w.steps; ++s)
    w.step(s, [&](int64_t kk, V b0, V b1) {
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const V av = hn::Set(d, a[r * lda + kk]);
        c0[r] = hn::MulAdd(av, b0, c0[r]);
        c1[r] = hn::MulAdd(av, b1, c1[r]);
      }
    });
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    hn::StoreU(c0[r], d, c + r * ldc);
    hn::StoreU(c1[r], d, c + r * ldc + kN);
  }
}

template <int MR, class W>
void tile_rest(const W& w, int64_t rest, const float* a, int64_t lda, float* c, int64_t ldc) {
  if constexpr (MR > 0) {
    if (rest == MR) return tile_rows<MR>(w, a, lda, c, ldc);
    tile_rest<MR - 1>(w, rest, a, lda, c, ldc);
  }
}

// Every row of a, MR at a time, then the rest.
template <int MR, class W>
void tile_all(const W& w, const float* a, int64_t lda, int64_t m, float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR) tile_rows<MR>(w, a + i * lda, lda, c + i * ldc, ldc);
  tile_rest<MR - 1>(w, m - i, a + i * lda, lda, c + i * ldc, ldc);
}

void tile(const TileArgs& t) { tile_all<kMR>(F32Rows{t.packed, t.k}, t.a, t.lda, t.m, t.c, t.ldc); }

// Rows of a a pass over the widened pairs. On x86 before AVX-512, 5, a row fewer than the f32
// tile's: with 6, GCC kept four accumulators on the stack (both rows' widened vectors and the
// mask beside 12). With AVX-512, 12 (24 accumulators of its 32 registers): a short sentence's
// ~20 rows then read each tile of W twice rather than three times (bench_gemv's encoder shapes
// at 20 rows, one thread, medium, alternating 3 rounds: 118-135 -> 137-147 GFLOP/s; one ~20-token
// sentence a call, bench_embed_speed, 3 rounds: all-MiniLM-L6-v2 4-7% faster in each,
// EmbeddingGemma 6% by the medians, -4% to +13% by the rounds).
constexpr int kW16MR = (HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3) ? 5 : HWY_ARCH_X86 ? 12 : kMR;
void tile_w16(const TileW16Args& t) {
  tile_all<kW16MR>(Bf16Pairs{t.packed, t.pairs}, t.a, t.lda, t.m, t.c, t.ldc);
}

void widen(const WidenArgs& w) {
  const D d;
  const Bf16Pairs pairs{w.pairs, w.k / 2};
  for (int64_t q = 0; q < pairs.steps; ++q)
    pairs.step(q, [&](int64_t kk, V b0, V b1) {
      hn::StoreU(b0, d, w.out + kk * kNR);
      hn::StoreU(b1, d, w.out + kk * kNR + kN);
    });
}

#endif  // !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
namespace iron::ops::gemm {

// The instruction sets gemm.cpp chooses among (select_isa), each Highway's copy of the shared
// loops for its width beside the loops of its own file.
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
#if HWY_TARGETS & HWY_AVX3
#define IRON_AVX3_COPY(fn, Result, Args) &N_AVX3::fn
constexpr int kAvx3NR = N_AVX3::kNR;
#else
// A test build for a processor without AVX-512 (CMakeLists.txt, IRON_HOST_KERNELS) leaves
// Highway's AVX-512 copies out. The kernel table still says what AVX-512's loops would take (its
// tests ask with a made-up processor's features); the copies Highway would have given throw,
// never reached on the processor such a build runs on.
template <class Result, class Args>
Result no_avx512_copy(const Args&) {
  throw Error(ErrorKind::value, "this build has no AVX-512 matmul loops: it was made for a processor without "
              "AVX-512 (IRON_HOST_KERNELS)");
}
#define IRON_AVX3_COPY(fn, Result, Args) &no_avx512_copy<Result, Args>
constexpr int kAvx3NR = 32;  // two vectors of 16 lanes
#endif
const Isa& avx512_isa() {
  static const Isa isa{.name = "avx512",
                       .nr = kAvx3NR,
                       .gemv = IRON_AVX3_COPY(gemv, void, GemvArgs),
                       .pack = IRON_AVX3_COPY(pack, void, PackArgs),
                       .tile = IRON_AVX3_COPY(tile, void, TileArgs),
                       .pack_bf16 = &avx512::pack_bf16,
                       .rows_bf16 = &avx512::rows_bf16,
                       .tile_bf16 = &avx512::tile_bf16,
                       .tile_w16 = IRON_AVX3_COPY(tile_w16, void, TileW16Args),
                       .widen = IRON_AVX3_COPY(widen, void, WidenArgs),
                       .quantise_x8 = &avx512::quantise_x8,
                       .gemm_int8 = &avx512::gemm_int8,
                       .gemv_many = IRON_AVX3_COPY(gemv_many, bool, GemvManyArgs),
                       .tile_bf16_amx = &tile_bf16_amx,
                       .gemm_int8_amx = &gemm_int8_amx,
                       .int8_instructions = "vpdpbusd"};
  return isa;
}
#undef IRON_AVX3_COPY
const Isa& avx2_isa() {
  static const Isa isa{.name = "avx2",
                       .nr = N_AVX2::kNR,
                       .gemv = &N_AVX2::gemv,
                       .pack = &N_AVX2::pack,
                       .tile = &N_AVX2::tile,
                       .tile_w16 = &N_AVX2::tile_w16,
                       .widen = &N_AVX2::widen,
                       .quantise_x8 = &quantise_x8_avx2,
                       .gemm_int8 = &gemm_int8_avx2,
                       .gemv_many = &N_AVX2::gemv_many,
                       .int8_instructions = "vpmaddubsw"};
  return isa;
}
const Isa& avx2_vnni_isa() {
  static const Isa isa = [] {
    Isa i = avx2_isa();
    i.gemm_int8 = &gemm_int8_avxvnni;
    i.int8_instructions = "vpdpbusd, AVX-VNNI";
    return i;
  }();
  return isa;
}
#elif HWY_ARCH_ARM_A64 && (HWY_TARGETS & HWY_NEON)
const Isa& neon_isa() {
  static const Isa isa{.name = "neon",
                       .nr = N_NEON::kNR,
                       .gemv = &N_NEON::gemv,
                       .pack = &N_NEON::pack,
                       .tile = &N_NEON::tile,
                       .tile_w16 = &N_NEON::tile_w16,
                       .widen = &N_NEON::widen,
                       .gemv_many = &N_NEON::gemv_many};
  return isa;
}
const Isa& neon_dotprod_isa() {
  static const Isa isa = [] {
    Isa i = neon_isa();
    i.quantise_x8 = &quantise_x8_dotprod;
    i.gemm_int8 = &gemm_int8_dotprod;
    i.int8_instructions = "sdot";
    return i;
  }();
  return isa;
}
#endif

}  // namespace iron::ops::gemm
#endif
