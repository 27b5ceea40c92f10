// The int8 path (Precision::medium) on ARM64 with the dot-product extension (ARMv8.2's
// `sdot`: Graviton 2 and later, Ampere Altra, Apple M1 and later, Cortex-A76 and later, the
// Raspberry Pi 5): x quantised to int8 blocks, W in the rearranged layout of kernels.hpp (made
// once per weight, the same bytes the x86 loops read), int32 dot products from sdot, f32 sums
// per block as the x86 loops finish them. Highway 1.0.3 has no int8 dot product, so this is a
// target-specific kernel beside the NEON f32 loops, as the x86 ones are (issue 33).
//
// A 64-byte load of the layout holds 4 columns of each of a group's 16 rows, byte 4j + i row
// j's column i: as four 128-bit registers, each 4 rows (a quarter of the group), which is what
// sdot multiplies with 4 values of x broadcast, into one int32 lane per row. The loop over a
// group is int8_pass.hpp's, which the x86 AVX2 loops share: a pass takes some quarters against
// some rows of x, each (quarter, row) an accumulator register and an int32 dot register (q6_k:
// two, one per half of a block, each half having its own scale). All
// quants are unsigned below 64 but q8_0's, stored plus 128 (for x86's vpdpbusd): flipped back
// here, so sdot multiplies signed bytes by signed bytes and q8_0 takes no offset term.
#include <arm_neon.h>

#include <cstdint>

#include "ops/gemm/int8_pass.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {
namespace {

// ---- x as int8 blocks ---------------------------------------------------------------------

void quantise_x8(const QuantiseX8Args& a) {
  for (int64_t b = 0; b < a.k / 32; ++b) {
    const float* x = a.x + b * 32;
    float32x4_t v[8];
    float32x4_t mx = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; ++i) v[i] = vld1q_f32(x + 4 * i), mx = vmaxq_f32(mx, vabsq_f32(v[i]));
    // As the x86 quantisers: int8_reciprocal's multiplier, |q| <= 127 rounded to nearest (even),
    // saturated for safety.
    const float m = vmaxvq_f32(mx), id = int8_reciprocal(m), scale = m / 127.0f;
    int32x4_t q[8];
    for (int i = 0; i < 8; ++i) q[i] = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
    for (int h = 0; h < 2; ++h) {
      const int16x8_t w0 = vcombine_s16(vqmovn_s32(q[4 * h]), vqmovn_s32(q[4 * h + 1]));
      const int16x8_t w1 = vcombine_s16(vqmovn_s32(q[4 * h + 2]), vqmovn_s32(q[4 * h + 3]));
      vst1q_s8(a.q + b * 32 + 16 * h, vcombine_s8(vqmovn_s16(w0), vqmovn_s16(w1)));
    }
    // The block's sums as rounded (what the weights' offsets meet; kernels.hpp), per 16 too.
    const int32_t s0 = vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
    const int32_t s1 = vaddvq_s32(vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
    a.scale[b] = scale;
    a.xsum[b] = scale * float(s0 + s1);
    a.xsum16[2 * b] = 32.0f * (scale * float(s0));
    a.xsum16[2 * b + 1] = 32.0f * (scale * float(s1));
  }
}

// ---- one quarter of a group: 4 rows of W ---------------------------------------------------------

inline float32x4_t halves4(const char* at) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(at)))); }
inline uint32x4_t bytes4_u(const char* at) {
  uint32_t v;
  __builtin_memcpy(&v, at, 4);
  return vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v))));
}
inline int32x4_t bytes4_s(const char* at) {
  uint32_t v;
  __builtin_memcpy(&v, at, 4);
  return vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v))));
}

/// The 4 rows' scales of block b for quarter `part`: as int8_blocks.hpp's Int8Scales on 4 lanes.
template <DType T>
struct Scales4 {
  float32x4_t d, m = vdupq_n_f32(0.0f), d16[2];
  float32x4_t super_d = vdupq_n_f32(0.0f), super_dmin = vdupq_n_f32(0.0f);  // from each super-block's first block
  void load(const char* group, int64_t b, int part) {
    if constexpr (T == DType::q6_k) {
      const char* header = group + int8_k_header_at(T, b / 8);
      if (b % 8 == 0) super_d = halves4(header + 8 * part);
      for (int s = 0; s < 2; ++s)
        d16[s] = vmulq_f32(super_d, vcvtq_f32_s32(bytes4_s(header + 32 + 16 * (2 * (b % 8) + s) + 4 * part)));
    } else if constexpr (int8_k(T)) {
      const char* header = group + int8_k_header_at(T, b / 8);
      const int64_t s = b % 8;
      if (s == 0) super_d = halves4(header + 8 * part), super_dmin = halves4(header + 32 + 8 * part);
      const uint32x4_t sm = bytes4_u(header + 64 + 16 * s + 4 * part);
      const uint32x4_t top = bytes4_u(header + 192 + 16 * (s / 2) + 4 * part);
      const uint32x4_t six = vandq_u32(sm, vdupq_n_u32(63));
      const uint32x4_t nibble = vandq_u32(s % 2 ? vshrq_n_u32(top, 4) : top, vdupq_n_u32(15));
      const uint32x4_t minimum = vorrq_u32(vshrq_n_u32(sm, 6), vshlq_n_u32(nibble, 2));
      d = vmulq_f32(super_d, vcvtq_f32_u32(six));
      m = vmulq_f32(super_dmin, vnegq_f32(vcvtq_f32_u32(minimum)));
    } else {
      d = halves4(group + int8_d_at(T, b) + 8 * part);
      if constexpr (int8_minimum(T)) m = halves4(group + int8_m_at(T, b) + 8 * part);
    }
  }
};

/// Load c (0-3) of a block's quants for quarter `part`, as signed bytes: `lo` columns 8c .. 8c + 3,
/// `hi` 8c + 4 .. 8c + 7, byte 4j + i row j's column.
template <DType T>
inline void unpack_quarter(const char* quants, int c, int part, int8x16_t* lo, int8x16_t* hi) {
  auto at = [&](int64_t offset) { return vld1q_u8(reinterpret_cast<const uint8_t*>(quants + offset + 16 * part)); };
  if constexpr (T == DType::q8_0) {
    const uint8x16_t flip = vdupq_n_u8(0x80);
    *lo = vreinterpretq_s8_u8(veorq_u8(at(128 * c), flip));
    *hi = vreinterpretq_s8_u8(veorq_u8(at(128 * c + 64), flip));
  } else {
    const uint8x16_t v = at(64 * c);
    uint8x16_t l = vandq_u8(v, vdupq_n_u8(0x0f)), h = vshrq_n_u8(v, 4);
    if constexpr (int8_fifth(T)) {  // plus 16 where bit 2c (low) or 2c + 1 (high) is set
      const uint8x16_t fifth = at(256), sixteen = vdupq_n_u8(16);
      l = vorrq_u8(l, vandq_u8(vtstq_u8(fifth, vdupq_n_u8(uint8_t(1u << (2 * c)))), sixteen));
      h = vorrq_u8(h, vandq_u8(vtstq_u8(fifth, vdupq_n_u8(uint8_t(2u << (2 * c)))), sixteen));
    }
    if constexpr (T == DType::q6_k) {  // the top 2 bits: bits 4 (c % 2) (low) and 4 (c % 2) + 2 (high)
      const uint8x16_t top = at(256 + 64 * (c / 2)), bits = vdupq_n_u8(0x30);
      l = vorrq_u8(l, vandq_u8(c % 2 ? top : vshlq_n_u8(top, 4), bits));
      h = vorrq_u8(h, vandq_u8(c % 2 ? vshrq_n_u8(top, 2) : vshlq_n_u8(top, 2), bits));
    }
    *lo = vreinterpretq_s8_u8(l);
    *hi = vreinterpretq_s8_u8(h);
  }
}

/// One row of x's block finished into its accumulator (4 rows of W): as int8_blocks.hpp's
/// int8_finish, q8_0 signed (no offset term).
template <DType T, class S>
inline float32x4_t finish_quarter(const S& s, const int32x4_t* dot, float scale, float xsum, const float* xsum16,
                          float32x4_t acc) {
  constexpr float kOffset = T == DType::q4_0 ? -8.0f : T == DType::q5_0 ? -16.0f : 0.0f;
  if constexpr (T == DType::q6_k) {
    for (int h = 0; h < 2; ++h) {
      const float32x4_t sum = vfmaq_n_f32(vdupq_n_f32(-xsum16[h]), vcvtq_f32_s32(dot[h]), scale);
      acc = vfmaq_f32(acc, s.d16[h], sum);
    }
    return acc;
  } else if constexpr (int8_minimum(T) || int8_k(T)) {
    const float32x4_t sum = vmulq_n_f32(vcvtq_f32_s32(dot[0]), scale);
    return vfmaq_f32(vfmaq_n_f32(acc, s.m, xsum), s.d, sum);
  } else {
    const float32x4_t sum = vfmaq_n_f32(vdupq_n_f32(kOffset * xsum), vcvtq_f32_s32(dot[0]), scale);
    return vfmaq_f32(acc, s.d, sum);
  }
}

// The registers int8_pass.hpp's loop takes: each 64-byte load of the layout as four quarters
// of 4 rows, one f32 lane a row.
struct Lanes {
  static constexpr int64_t kRows = 4;
  static float32x4_t fzero() { return vdupq_n_f32(0.0f); }
  static int8x16_t broadcast(int32_t four) { return vreinterpretq_s8_s32(vdupq_n_s32(four)); }
  static void store(float* y, float32x4_t acc) { vst1q_f32(y, acc); }
  static void prefetch(const char* at) { __builtin_prefetch(at); }
  static constexpr int64_t ahead(int rows) { return part_prefetch_ahead(rows); }
  template <DType T>
  using Scales = Scales4<T>;
  template <DType T>
  [[gnu::always_inline]] static void unpack(const char* quants, int c, int part, int8x16_t* lo, int8x16_t* hi) {
    unpack_quarter<T>(quants, c, part, lo, hi);
  }
  template <DType T, class S>
  [[gnu::always_inline]] static float32x4_t finish(const S& s, const int32x4_t* sums, float scale, float xsum,
                                         const float* xsum16, float32x4_t acc) {
    return finish_quarter<T>(s, sums, scale, xsum, xsum16, acc);
  }
  // A block's int32 sums of one quarter against one row of x, sdot straight into them.
  static int32x4_t izero() { return vdupq_n_s32(0); }
  template <DType>
  [[gnu::always_inline]] static int32x4_t dot(int32x4_t sums, int8x16_t w, int8x16_t x) { return vdotq_s32(sums, w, x); }
  template <DType T>
  using Dot = DotInstruction<Lanes, T>;
  // A pass of several rows in 32 registers: 2 quarters (half the group) take 4 for the unpacked
  // quants; each row of x 2 accumulators and 2 dot products (4 for q6_k). A decode's one row takes
  // the whole group in one pass (the group read once).
  template <DType T>
  static constexpr int kPassRows = T == DType::q6_k ? 2 : 3;
  static constexpr int kPassParts = 2;
  // Whether a call of several passes unpacks each group once for all of them (int8_pass.hpp's
  // UnpackedGroup): as on AVX2, whose 4-row passes gained 1.07-1.65x from it (int8_avx2_loops.hpp),
  // every kind but q8_0, these passes taking fewer rows still. Not timed on an ARM core.
  template <DType T>
  static constexpr bool kUnpackOnce = T != DType::q8_0;
  template <DType T>
  static constexpr bool kScalesAfterProducts = false;  // measured only where AVX2 runs (int8_avx2_loops.hpp)
};

}  // namespace

void quantise_x8_dotprod(const QuantiseX8Args& a) { quantise_x8(a); }

void gemm_int8_dotprod(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { int8_groups<Lanes, decltype(kind)::value>(g); });
}

}  // namespace iron::ops::gemm
