// The int8 path (Precision::medium) on ARM64 with the dot-product extension (ARMv8.2's
// `sdot`: Graviton 2 and later, Ampere Altra, Apple M1 and later, Cortex-A76 and later, the
// Raspberry Pi 5): x quantised to int8 blocks, W in the rearranged layout of kernels.hpp (made
// once per weight, the same bytes the x86 loops read), int32 dot products from sdot, f32 sums
// per block as the x86 loops finish them. Highway 1.0.3 has no int8 dot product, so this is a
// target-specific kernel beside the NEON f32 loops, as the x86 ones are (issue 33).
//
// A 64-byte load of the layout holds 4 columns of each of a group's 16 rows, byte 4j + i row
// j's column i: as four 128-bit registers, each 4 rows (a quarter of the group), which is what
// sdot multiplies with 4 values of x broadcast, into one int32 lane per row. A pass takes H
// quarters of a group against R rows of x, each (quarter, row) an accumulator register and an
// int32 dot register (q6_k: two, one per half of a block, each half having its own scale). All
// quants are unsigned below 64 but q8_0's, stored plus 128 (for x86's vpdpbusd): flipped back
// here, so sdot multiplies signed bytes by signed bytes and q8_0 takes no offset term.
#include <arm_neon.h>

#include <cstdint>

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
    // As the x86 quantisers: the reciprocal 0 for a block of zeros, |q| <= 127 rounded to
    // nearest (even), saturated for safety.
    const float m = vmaxvq_f32(mx), id = m > 0 ? 127.0f / m : 0.0f, scale = m / 127.0f;
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
    a.xsum16[2 * b] = scale * float(s0);
    a.xsum16[2 * b + 1] = scale * float(s1);
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
inline void unpack(const char* quants, int c, int part, int8x16_t* lo, int8x16_t* hi) {
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
template <DType T>
inline float32x4_t finish(const Scales4<T>& s, const int32x4_t* dot, float scale, float xsum, const float* xsum16,
                          float32x4_t acc) {
  constexpr float kOffset = T == DType::q4_0 ? -8.0f : T == DType::q5_0 ? -16.0f : 0.0f;
  if constexpr (T == DType::q6_k) {
    for (int h = 0; h < 2; ++h) {
      const float32x4_t sum = vfmaq_n_f32(vdupq_n_f32(-32.0f * xsum16[h]), vcvtq_f32_s32(dot[h]), scale);
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

// Bytes ahead of the block being read that a pass prefetches (as the x86 loops).
template <int R>
constexpr int64_t kPrefetchAhead = R == 1 ? 4096 : 1024;

// R rows of x (from i0) against H quarters of one group from quarter p0: 4 output columns per
// row and quarter, at y + 4 p. Each row of x gets the same operations in the same order whatever
// R and H are, so a row's outputs do not depend on the rows beside it.
template <DType T, int R, int H>
inline void int8_pass(const GemmInt8Args& g, int64_t i0, const char* group, int p0, float* y) {
  const int64_t blocks = g.k / 32;
  const int8_t* q[R];
  const float *scale[R], *xsum[R], *xsum16[R];
  float32x4_t acc[H][R];
  for (int r = 0; r < R; ++r) {
    q[r] = g.q + (i0 + r) * g.k;
    scale[r] = g.scale + (i0 + r) * blocks;
    xsum[r] = g.xsum + (i0 + r) * blocks;
    xsum16[r] = g.xsum16 + (i0 + r) * 2 * blocks;
    for (int h = 0; h < H; ++h) acc[h][r] = vdupq_n_f32(0.0f);
  }
  auto x4 = [&](int r, int64_t at) {
    int32_t v;
    __builtin_memcpy(&v, q[r] + at, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
  };
  Scales4<T> sc[H];
  for (int64_t b = 0; b < blocks; ++b) {
    const char* quants = group + int8_quants_at(T, b);
    if (p0 == 0)
      for (int c = 0; c < (T == DType::q6_k ? 7 : int8_fifth(T) ? 6 : 5); ++c)
        __builtin_prefetch(quants + kPrefetchAhead<R> + 64 * c);
    for (int h = 0; h < H; ++h) sc[h].load(group, b, p0 + h);
    int32x4_t dot[H][R][2];
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < R; ++r) dot[h][r][0] = dot[h][r][1] = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      int8x16_t lo[H], hi[H];
      for (int h = 0; h < H; ++h) unpack<T>(quants, c, p0 + h, &lo[h], &hi[h]);
      const int half = T == DType::q6_k ? c / 2 : 0;
      for (int r = 0; r < R; ++r) {
        const int8x16_t x_lo = x4(r, b * 32 + 8 * c), x_hi = x4(r, b * 32 + 8 * c + 4);
        for (int h = 0; h < H; ++h) {
          dot[h][r][half] = vdotq_s32(dot[h][r][half], lo[h], x_lo);
          dot[h][r][half] = vdotq_s32(dot[h][r][half], hi[h], x_hi);
        }
      }
    }
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < R; ++r)
        acc[h][r] = finish<T>(sc[h], dot[h][r], scale[r][b], xsum[r][b], xsum16[r] + 2 * b, acc[h][r]);
  }
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < R; ++r) vst1q_f32(y + r * g.ldy + 4 * (p0 + h), acc[h][r]);
}

// A pass's shape in 32 registers: H quarters take 2H for the unpacked quants; each row of x H
// accumulators and H dot products (2H for q6_k). A decode's one row takes the whole group in one
// pass (the group read once); several rows take half a group, 3 rows a pass (q6_k 2).
template <DType T>
constexpr int kPassRows = T == DType::q6_k ? 2 : 3;

template <DType T, int R = kPassRows<T> - 1>
void int8_pass_tail(const GemmInt8Args& g, int64_t i, const char* group, int p, float* y) {
  if constexpr (R >= 1) {
    if (g.m - i == R) return int8_pass<T, R, 2>(g, i, group, p, y + i * g.ldy);
    int8_pass_tail<T, R - 1>(g, i, group, p, y);
  }
}

template <DType T>
void gemm_int8_groups(const GemmInt8Args& g) {
  const int64_t group_bytes = PackedInt8::group_bytes(g.k, T);
  constexpr int kPass = kPassRows<T>;
  for (int64_t j = 0; j < g.groups; ++j) {
    const char* group = g.w + j * group_bytes;
    float* y = g.y + j * kInt8Rows;
    if (g.m == 1) {
      int8_pass<T, 1, 4>(g, 0, group, 0, y);
      continue;
    }
    for (int p = 0; p < 4; p += 2) {
      int64_t i = 0;
      for (; i + kPass <= g.m; i += kPass) int8_pass<T, kPass, 2>(g, i, group, p, y + i * g.ldy);
      if (i < g.m) int8_pass_tail<T>(g, i, group, p, y);
    }
  }
}

}  // namespace

void quantise_x8_dotprod(const QuantiseX8Args& a) { quantise_x8(a); }

void gemm_int8_dotprod(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { gemm_int8_groups<decltype(kind)::value>(g); });
}

}  // namespace iron::ops::gemm
