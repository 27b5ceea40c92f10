// Float elements of the kinds activations take (0 f32, 1 f16, 2 bf16: load.glsl's numbers) in
// buffers bound as 32-bit words, for shaders with several such buffers (load.glsl reads one
// array). ELEMENT_LOAD(name, array) defines `float name(int kind, uint e)`; ELEMENT_STORE(name,
// array) defines `void name(int kind, uint e, float v)`, rounding as the CPU's from_f32 does
// (src/core/dtype.cpp: to nearest, ties to even, in integer arithmetic, since GLSL leaves the
// conversions' rounding to the implementation). A 16-bit element shares its word with a
// neighbour that another invocation may write at the same moment, so a store writes only its
// own half, with atomics (the array must not be declared writeonly); an f32 store is a plain one.

// f32 to f16 bits, as f32_to_f16: overflow to infinity, NaN kept quiet.
uint f32_to_f16_bits(float f) {
  const uint bits = floatBitsToUint(f);
  const uint sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  if (magnitude < 0x38800000u) return sign | uint(roundEven(uintBitsToFloat(magnitude) * 16777216.0));
  uint rebiased = magnitude - (112u << 23);
  rebiased += 0xFFFu + ((rebiased >> 13) & 1u);
  return sign | (rebiased >> 13);
}

// f32 to bf16 bits, as f32_to_bf16.
uint f32_to_bf16_bits(float f) {
  uint bits = floatBitsToUint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits >> 16) | 0x40u;
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return bits >> 16;
}

#define ELEMENT_LOAD(NAME, RAW)                                                        \
  float NAME(int kind, uint e) {                                                      \
    if (kind == 0) return uintBitsToFloat(RAW[e]);                                    \
    const uint half_bits = (RAW[e >> 1] >> ((e & 1u) * 16u)) & 0xFFFFu;               \
    return kind == 1 ? unpackHalf2x16(half_bits).x : uintBitsToFloat(half_bits << 16); \
  }

#define ELEMENT_STORE(NAME, RAW)                                                       \
  void NAME(int kind, uint e, float v) {                                              \
    if (kind == 0) {                                                                  \
      RAW[e] = floatBitsToUint(v);                                                    \
      return;                                                                         \
    }                                                                                 \
    const uint shift = (e & 1u) * 16u;                                                \
    const uint bits = kind == 1 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);           \
    atomicAnd(RAW[e >> 1], ~(0xFFFFu << shift));                                      \
    atomicOr(RAW[e >> 1], bits << shift);                                             \
  }
