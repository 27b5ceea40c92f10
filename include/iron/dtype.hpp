// Element types: plain numbers and the block-quantised kinds GGUF checkpoints hold.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace iron {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  i8,
  i32,
  q8_0,  // blocks of 32: f16 scale, 32 x int8
  q4_0,  // blocks of 32: f16 scale, 16 bytes of nibbles (value - 8)
  q4_1,  // blocks of 32: f16 scale, f16 minimum, 16 bytes of nibbles
  q4_k,  // super-blocks of 256 with 6-bit sub-block scales and minimums
  q6_k,  // super-blocks of 256 with 8-bit sub-block scales
  q5_0,  // blocks of 32: f16 scale, 4 bytes of fifth bits, 16 bytes of nibbles (value - 16)
  q5_1,  // blocks of 32: f16 scale, f16 minimum, 4 bytes of fifth bits, 16 bytes of nibbles
  q5_k,  // super-blocks of 256: q4_k's scales and minimums, 32 bytes of fifth bits, nibbles
};

inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i8 = DType::i8;
inline constexpr DType i32 = DType::i32;

/// How a dtype lays out: `block` elements take `bytes` bytes.
struct DTypeInfo {
  std::string_view name;
  int block;
  int bytes;
  bool floating;   // a float kind (quantised kinds are float kinds)
  bool quantised;  // stored in blocks with shared scales
};

const DTypeInfo& info(DType t);
inline std::string_view name(DType t) { return info(t).name; }
/// Parses a dtype's name ("bf16", "q4_1"); throws iron::Error for an unknown one.
DType dtype_from_name(std::string_view name);

/// Bytes that `elements` elements take; throws if `elements` is not a whole number of blocks.
int64_t storage_bytes(DType t, int64_t elements);

// ---- scalar conversions -------------------------------------------------------------

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Rounds to nearest, ties to even; a NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h);
/// Rounds to nearest, ties to even; overflow gives infinity; NaN stays NaN.
uint16_t f32_to_f16(float f);

/// Turns `n` elements of `from` (a whole number of blocks) into f32.
void to_f32(DType from, const void* src, float* dst, int64_t n);
/// Writes `n` f32 values as `to`, each rounded once; quantised kinds are refused.
void from_f32(DType to, const float* src, void* dst, int64_t n);

}  // namespace iron
