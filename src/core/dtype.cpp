#include "iron/dtype.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/k_quants.hpp"
#include "iron/error.hpp"

namespace iron {

namespace {
constexpr std::array<DTypeInfo, 13> kInfo = {{
    {"f32", 1, 4, true, false},
    {"f16", 1, 2, true, false},
    {"bf16", 1, 2, true, false},
    {"i8", 1, 1, false, false},
    {"i32", 1, 4, false, false},
    {"q8_0", 32, 34, true, true},
    {"q4_0", 32, 18, true, true},
    {"q4_1", 32, 20, true, true},
    {"q4_k", 256, 144, true, true},
    {"q6_k", 256, 210, true, true},
    {"q5_0", 32, 22, true, true},
    {"q5_1", 32, 24, true, true},
    {"q5_k", 256, 176, true, true},
}};
}  // namespace

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }

DType dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  value_error("unknown dtype '" + std::string(name) +
              "' (known: f32 f16 bf16 i8 i32 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k)");
}

int64_t storage_bytes(DType t, int64_t elements) {
  const DTypeInfo& i = info(t);
  if (elements < 0 || elements % i.block != 0)
    value_error(std::to_string(elements) + " elements are not a whole number of " +
                std::string(i.name) + " blocks of " + std::to_string(i.block));
  return elements / i.block * i.bytes;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: exact in f32
    float f = std::ldexp(float(mantissa), -24);
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  if (magnitude < 0x38800000u) {  // below the smallest normal f16 (2^-14): subnormal
    // Scale so the f16 subnormal unit (2^-24) is 1, then round to nearest even.
    float a;
    std::memcpy(&a, &magnitude, 4);
    float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    float rounded = std::nearbyint(scaled);
    return sign | uint16_t(rounded);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t rebiased = magnitude - (112u << 23);
  rebiased += 0xfffu + ((rebiased >> 13) & 1u);
  return sign | uint16_t(rebiased >> 13);
}

namespace {

void dequantise_q8_0(const uint8_t* src, float* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, src += 34, dst += 32) {
    uint16_t d16;
    std::memcpy(&d16, src, 2);
    float d = f16_to_f32(d16);
    const auto* q = reinterpret_cast<const int8_t*>(src + 2);
    for (int i = 0; i < 32; ++i) dst[i] = d * float(q[i]);
  }
}

// The blocks of 32 with 4- or 5-bit quants (ggml's q4_0, q4_1, q5_0, q5_1): an f16 scale d, with
// `Minimum` an f16 minimum m, with `Fifth` 4 bytes whose bit i is element i's fifth bit, then 16
// bytes of nibbles: byte i holds element i (low nibble) and element i + 16 (high nibble). Element
// q is d q + m with a minimum, else d (q - 8) (4 bits) or d (q - 16) (5 bits).
template <bool Minimum, bool Fifth>
void dequantise_32(const uint8_t* src, float* dst, int64_t blocks) {
  constexpr int kBytes = 2 + (Minimum ? 2 : 0) + (Fifth ? 4 : 0) + 16;
  for (int64_t b = 0; b < blocks; ++b, src += kBytes, dst += 32) {
    uint16_t d16, m16 = 0;
    std::memcpy(&d16, src, 2);
    if (Minimum) std::memcpy(&m16, src + 2, 2);
    uint32_t fifth = 0;
    if (Fifth) std::memcpy(&fifth, src + (Minimum ? 4 : 2), 4);
    const float d = f16_to_f32(d16);
    const float m = Minimum ? f16_to_f32(m16) : 0.0f;
    const int offset = Minimum ? 0 : Fifth ? 16 : 8;
    const uint8_t* q = src + kBytes - 16;
    for (int i = 0; i < 32; ++i) {
      const int nibble = i < 16 ? q[i] & 0x0f : q[i - 16] >> 4;
      const int value = nibble | (Fifth ? int((fifth >> i) & 1u) << 4 : 0);
      dst[i] = Minimum ? d * float(value) + m : d * float(value - offset);
    }
  }
}

// Q4_K and Q5_K: f16 d, f16 dmin, 12 bytes of packed 6-bit scales and minimums for 8 sub-blocks
// of 32, (Q5_K) 32 bytes of fifth bits, then 128 bytes of nibbles; each 64 elements share 32
// bytes (low nibbles, then high). Element l of sub-block j takes bit j of fifth-bit byte l.
template <bool Fifth>
void dequantise_k(const uint8_t* src, float* dst, int64_t blocks) {
  constexpr int kBytes = Fifth ? 176 : 144;
  for (int64_t b = 0; b < blocks; ++b, src += kBytes) {
    uint16_t d16, m16;
    std::memcpy(&d16, src, 2);
    std::memcpy(&m16, src + 2, 2);
    float d = f16_to_f32(d16), dmin = f16_to_f32(m16);
    const uint8_t* packed = src + 4;
    const uint8_t* fifth = src + 16;
    const uint8_t* q = src + (Fifth ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      uint8_t scale, minimum;
      k_scale_min(j, packed, &scale, &minimum);
      const uint8_t* nibbles = q + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int value = j % 2 ? nibbles[l] >> 4 : nibbles[l] & 0x0f;
        if (Fifth) value |= ((fifth[l] >> j) & 1) << 4;
        *dst++ = d * float(scale) * float(value) - dmin * float(minimum);
      }
    }
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales, f16 d.
void dequantise_q6_k(const uint8_t* src, float* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(src + 192);
    uint16_t d16;
    std::memcpy(&d16, src + 208, 2);
    float d = f16_to_f32(d16);
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, scales += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = int((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = int((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * float(scales[is]) * float(q1);
        dst[l + 32] = d * float(scales[is + 2]) * float(q2);
        dst[l + 64] = d * float(scales[is + 4]) * float(q3);
        dst[l + 96] = d * float(scales[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace

void to_f32(DType from, const void* src, float* dst, int64_t n) {
  const int64_t blocks = n / info(from).block;
  switch (from) {
    case DType::f32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * 4);  // an empty tensor may have no memory
      return;
    case DType::f16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::bf16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::i8: {
      const auto* s = static_cast<const int8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::i32: {
      const auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = float(s[i]);
      return;
    }
    case DType::q8_0:
      return dequantise_q8_0(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q4_0:
      return dequantise_32<false, false>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q4_1:
      return dequantise_32<true, false>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q5_0:
      return dequantise_32<false, true>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q5_1:
      return dequantise_32<true, true>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q4_k:
      return dequantise_k<false>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q5_k:
      return dequantise_k<true>(static_cast<const uint8_t*>(src), dst, blocks);
    case DType::q6_k:
      return dequantise_q6_k(static_cast<const uint8_t*>(src), dst, blocks);
  }
}

void from_f32(DType to, const float* src, void* dst, int64_t n) {
  switch (to) {
    case DType::f32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * 4);  // an empty tensor may have no memory
      return;
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::i8: {
      auto* d = static_cast<int8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = int8_t(std::trunc(src[i]));
      return;
    }
    case DType::i32: {
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = int32_t(std::trunc(src[i]));
      return;
    }
    case DType::q8_0: {  // a KV cache in q8_0: blocks of 32 rounded as llama.cpp's quantize_row_q8_0
      if (n % 32) value_error("q8_0 holds whole blocks of 32 values; got " + std::to_string(n));
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t b = 0; b < n / 32; ++b, src += 32, d += 34) {
        float largest = 0;
        for (int i = 0; i < 32; ++i) largest = std::max(largest, std::fabs(src[i]));
        const float scale = largest / 127.0f, inverse = scale != 0 ? 1.0f / scale : 0.0f;
        const uint16_t scale16 = f32_to_f16(scale);
        std::memcpy(d, &scale16, 2);
        // A scale below about 2.9e-39 (subnormal) has a reciprocal that overflows: those blocks
        // divide instead. Non-finite
        // values (NaN, or an infinity's block) are clamped into int8 rather than converted
        // out of its range.
        const bool divide = std::isinf(inverse);
        for (int i = 0; i < 32; ++i) {
          const float q = std::round(divide ? src[i] / scale : src[i] * inverse);
          d[2 + i] = uint8_t(int8_t(q >= 127.0f ? 127.0f : q <= -127.0f ? -127.0f : q == q ? q : 0.0f));
        }
      }
      return;
    }
    default:
      value_error("cannot write f32 values as " + std::string(name(to)) +
                  ": quantising to it is not supported");
  }
}

}  // namespace iron
