// Elements of every dtype the CPU reads, from a buffer bound as 32-bit words (so no 8- or 16-bit
// storage feature is needed): a shader defines RAW as the name of its `uint RAW[]` array, then
// includes this file. Kinds: 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1, 6 i32 (as a float),
// 7 q5_0, 8 q5_1, 9 q4_k, 10 q5_k, 11 q6_k (layouts as src/core/dtype.cpp describes them).
// Elements are counted from the buffer's start; a block kind's element e sits in block e / 32
// (e / 256 for the K-quants, 9 and up).

uint raw_byte(uint i) { return (RAW[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
uint raw_half(uint i) { return (RAW[i >> 2] >> ((i & 2u) * 8u)) & 0xffffu; }
float raw_f16(uint i) { return unpackHalf2x16(raw_half(i)).x; }

// Element j of K-quant super-block `block`.
float load_k(int kind, uint block, uint j) {
  const uint sub = j / 32u, l = j % 32u;
  if (kind == 11) {  // q6_k: low nibbles, 2-bit high parts, int8 scales per 16, f16 d
    const uint at = block * 210u, h = j / 128u, c = (j % 128u) / 32u;
    const uint low = (raw_byte(at + 64u * h + 32u * (c % 2u) + l) >> (4u * (c / 2u))) & 15u;
    const uint high = (raw_byte(at + 128u + 32u * h + l) >> (2u * c)) & 3u;
    const int scale = int(raw_byte(at + 192u + 8u * h + 2u * c + l / 16u) << 24) >> 24;
    return raw_f16(at + 208u) * float(scale) * float(int(low | (high << 4)) - 32);
  }
  // q4_k, q5_k: f16 d and dmin, 12 bytes of 6-bit scales and minimums, (q5_k) 32 bytes of fifth
  // bits, nibbles (sub-blocks 2p, 2p + 1: the low and high nibbles of 32 bytes)
  const bool fifth = kind == 10;
  const uint at = block * (fifth ? 176u : 144u), packed = at + 4u;
  uint scale, minimum;
  if (sub < 4u) {
    scale = raw_byte(packed + sub) & 63u;
    minimum = raw_byte(packed + sub + 4u) & 63u;
  } else {
    scale = (raw_byte(packed + sub + 4u) & 15u) | ((raw_byte(packed + sub - 4u) >> 6) << 4);
    minimum = (raw_byte(packed + sub + 4u) >> 4) | ((raw_byte(packed + sub) >> 6) << 4);
  }
  uint q = (raw_byte(at + (fifth ? 48u : 16u) + 32u * (sub / 2u) + l) >> (4u * (sub % 2u))) & 15u;
  if (fifth) q |= ((raw_byte(at + 16u + l) >> sub) & 1u) << 4;
  return raw_f16(at) * float(scale) * float(q) - raw_f16(at + 2u) * float(minimum);
}

float load(int kind, uint e) {
  if (kind == 0) return uintBitsToFloat(RAW[e]);
  if (kind == 1) return raw_f16(2u * e);
  if (kind == 2) return uintBitsToFloat(raw_half(2u * e) << 16);
  if (kind == 6) return float(int(RAW[e]));
  if (kind >= 9) return load_k(kind, e / 256u, e % 256u);
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
  if (kind == 7 || kind == 8) {  // q5_0, q5_1: q4_0's and q4_1's blocks with 4 bytes of fifth bits
    const bool minimum = kind == 8;
    const uint at = block * (minimum ? 24u : 22u), fifth_at = at + (minimum ? 4u : 2u);
    const uint fifth = (raw_byte(fifth_at + j / 8u) >> (j % 8u)) & 1u;
    const uint q = ((raw_byte(fifth_at + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u) | (fifth << 4);
    return minimum ? raw_f16(at) * float(q) + raw_f16(at + 2u) : raw_f16(at) * float(int(q) - 16);
  }
  // q4_1: an f16 scale and minimum, 16 bytes of nibbles
  const uint at = block * 20u;
  const uint q = (raw_byte(at + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
  return raw_f16(at) * float(q) + raw_f16(at + 2u);
}

// Eight bytes from byte `b` on, as two words (the first byte lowest): three word reads at most,
// none past the word holding byte b + 7.
uvec2 raw_8bytes(uint b) {
  const uint i = b >> 2, s = (b & 3u) * 8u;
  const uint w0 = RAW[i], w1 = RAW[i + 1u];
  if (s == 0u) return uvec2(w0, w1);
  const uint w2 = RAW[i + 2u];
  return uvec2((w0 >> s) | (w1 << (32u - s)), (w1 >> s) | (w2 << (32u - s)));
}

// Whether load8 reads `kind` by groups (its block's scale once for eight elements, their bits in
// two or three words): the kinds most checkpoints' large matrices hold. load8 takes the others
// element by element.
bool grouped_kind(int kind) { return kind <= 5 && kind != 2; }

// Elements e .. e + 7 (e a multiple of 8, so never across a block: blocks start at multiples of
// 32) of any kind; the same values load() gives one at a time.
void load8(int kind, uint e, out float v[8]) {
  if (kind == 0) {
    for (uint i = 0u; i < 8u; ++i) v[i] = uintBitsToFloat(RAW[e + i]);
    return;
  }
  if (kind == 1) {
    for (uint i = 0u; i < 4u; ++i) {
      const vec2 pair = unpackHalf2x16(RAW[(e >> 1) + i]);
      v[2u * i] = pair.x;
      v[2u * i + 1u] = pair.y;
    }
    return;
  }
  const uint block = e / 32u, j = e % 32u;
  if (kind == 3) {  // q8_0: the 8 int8 from byte 2 + j of the block on
    const uint at = block * 34u;
    const float scale = raw_f16(at);
    const uvec2 q = raw_8bytes(at + 2u + j);
    for (uint i = 0u; i < 8u; ++i) v[i] = scale * float(int((i < 4u ? q.x : q.y) << (24u - 8u * (i % 4u))) >> 24);
    return;
  }
  if (kind == 4 || kind == 5) {  // q4_0, q4_1: the low (j < 16) or high nibbles of 8 bytes
    const bool minimum = kind == 5;
    const uint at = block * (minimum ? 20u : 18u);
    const uvec2 q = raw_8bytes(at + (minimum ? 4u : 2u) + (j & 15u));
    const uint shift = j < 16u ? 0u : 4u;
    const float scale = raw_f16(at), offset = minimum ? raw_f16(at + 2u) : -8.0 * scale;
    for (uint i = 0u; i < 8u; ++i)
      v[i] = scale * float(((i < 4u ? q.x : q.y) >> (8u * (i % 4u) + shift)) & 15u) + offset;
    return;
  }
  for (uint i = 0u; i < 8u; ++i) v[i] = load(kind, e + i);
}
