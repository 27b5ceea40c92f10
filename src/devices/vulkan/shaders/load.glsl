// Elements of every dtype the CPU reads, from a buffer bound as 32-bit words (so no 8- or 16-bit
// storage feature is needed): a shader defines RAW as the name of its `uint RAW[]` array, then
// includes this file. Kinds: 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1, 6 i32 (as a float).
// Elements are counted from the buffer's start; a block kind's element e sits in block e / 32.

uint raw_byte(uint i) { return (RAW[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
uint raw_half(uint i) { return (RAW[i >> 2] >> ((i & 2u) * 8u)) & 0xffffu; }
float raw_f16(uint i) { return unpackHalf2x16(raw_half(i)).x; }

float load(int kind, uint e) {
  if (kind == 0) return uintBitsToFloat(RAW[e]);
  if (kind == 1) return raw_f16(2u * e);
  if (kind == 2) return uintBitsToFloat(raw_half(2u * e) << 16);
  if (kind == 6) return float(int(RAW[e]));
  const uint block = e / 32u, j = e % 32u;
  if (kind == 3) {  // q8_0: an f16 scale, 32 int8
    const uint at = block * 34u;
    return raw_f16(at) * float(int(raw_byte(at + 2u + j) << 24) >> 24);
  }
  if (kind == 4) {  // q4_0: an f16 scale, 16 bytes of nibbles (low: the first 16), offset 8
    const uint at = block * 18u;
    const uint q = (raw_byte(at + 2u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    return raw_f16(at) * float(int(q) - 8);
  }
  // q4_1: an f16 scale and minimum, 16 bytes of nibbles
  const uint at = block * 20u;
  const uint q = (raw_byte(at + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
  return raw_f16(at) * float(q) + raw_f16(at + 2u);
}
