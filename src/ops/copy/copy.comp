#version 450
#extension GL_GOOGLE_include_directive : require
// Copy, Gather and Transpose: any view of rank 1 to 4 into any view, rows gathered by per-call
// ids (an id outside the table writes zeros, as on the CPU) or scattered to the destination rows
// per-call ids pick (a batched decode's cache rows; an id outside the table writes nothing), every
// kind load.glsl reads in; f32,
// f16, bf16, i32 or q8_0 out (a KV cache's types). The extent on each axis is what both views
// hold valid this call. One invocation per element (per block of 32 for q8_0), in a grid-stride
// loop. Values are rounded exactly as the CPU's from_f32 rounds them (src/core/dtype.cpp), in
// integer arithmetic where GLSL leaves the rounding to the implementation. A 16-bit element or a
// q8_0 block shares 32-bit words with its neighbours, which other invocations write at the same
// time: those words are written with atomics on the element's own bits.
//   specialization constants: 0 the source's kind, 1 the destination's (0 f32, 1 f16, 2 bf16,
//   3 q8_0, 6 i32), 2 rank, 3 gathered by ids, 4 scattered by ids
//   bindings: source (raw words), destination (words), ids (i32), destination ids (i32), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kSource = 0;
layout(constant_id = 1) const int kTarget = 0;
layout(constant_id = 2) const int kRank = 1;
layout(constant_id = 3) const bool kGathered = false;
layout(constant_id = 4) const bool kScattered = false;

layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) buffer D { uint dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { int ids[]; };
layout(std430, set = 0, binding = 3) readonly buffer J { int dst_ids[]; };
#define WORDS_BINDING 4
#include "devices/vulkan/shaders/words.glsl"
#define RAW src
#include "devices/vulkan/shaders/load.glsl"
#include "devices/vulkan/shaders/elements.glsl"

layout(push_constant) uniform Push {
  int src_base, src_offset, dst_base, dst_offset, ids_base, ids_offset;
  int table_rows;
  int dst_ids_base, dst_ids_offset, dst_table_rows;
  int src_valid[4], dst_valid[4];  // words: each axis's valid entries
  int src_stride[4], dst_stride[4];  // (int arrays: std430 packs them as the C++ struct does)
} p;

// Writes `width` bits (8 or 16) at bit `bit` of the destination: only those bits, atomically.
void store_bits(uint bit, uint width, uint value) {
  const uint w = bit >> 5, shift = bit & 31u, mask = ((1u << width) - 1u) << shift;
  atomicAnd(dst[w], ~mask);
  atomicOr(dst[w], (value << shift) & mask);
}
// a / b correctly rounded (GLSL's division may be 2.5 ulp off; the CPU's is IEEE's): one
// correction from the exact remainder.
float divide(float a, float b) {
  const float q = a / b;
  return q + fma(-q, b, a) / b;
}
// std::round: halves away from zero (GLSL's round leaves them to the implementation).
float round_away(float x) {
  const float whole = trunc(x);
  return abs(x - whole) >= 0.5 ? whole + sign(x) : whole;
}

float source_value(int s, bool outside) { return outside ? 0.0 : load(kSource, uint(s)); }

void main() {
  uint extent[4];
  uint n = 1;
  for (int a = 0; a < kRank; ++a) {
    extent[a] = uint(min(word(p.src_valid[a]), word(p.dst_valid[a])));
    n *= extent[a];
  }
  // q8_0: an item is a block of 32 along the last axis (the recorder checked it is contiguous in
  // the destination and whole blocks long).
  const uint per = kTarget == 3 ? 32u : 1u;
  if (kTarget == 3) {
    n /= 32u;
    extent[kRank - 1] /= 32u;
  }
  const int s0 = p.src_base + word(p.src_offset), d0 = p.dst_base + word(p.dst_offset);
  const int i0 = p.ids_base + word(p.ids_offset), j0 = p.dst_ids_base + word(p.dst_ids_offset);
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint item = gl_GlobalInvocationID.x; item < n; item += stride) {
    int s = s0, d = d0;
    uint rest = item;
    bool outside = false, nowhere = false;
    for (int a = kRank - 1; a >= 0; --a) {
      int index = int(rest % extent[a]);
      rest /= extent[a];
      if (a == kRank - 1) index *= int(per);
      if (a == 0 && kScattered) {
        const int row = dst_ids[j0 + index];
        nowhere = row < 0 || row >= p.dst_table_rows;
        d += row * p.dst_stride[a];
      } else {
        d += index * p.dst_stride[a];
      }
      if (a == 0 && kGathered) {
        index = ids[i0 + index];
        outside = index < 0 || index >= p.table_rows;
      }
      s += index * p.src_stride[a];
    }
    if (nowhere) continue;
    if (kTarget == 6) {
      dst[d] = outside ? 0u : (kSource == 6 ? src[s] : uint(int(load(kSource, uint(s)))));
    } else if (kTarget == 0) {
      dst[d] = floatBitsToUint(source_value(s, outside));
    } else if (kTarget == 1 || kTarget == 2) {
      const float v = source_value(s, outside);
      store_bits(uint(d) * 16u, 16u, kTarget == 1 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v));
    } else {
      // q8_0, as quantize_row_q8_0: the largest magnitude over 127 as the f16 scale, each value
      // times its inverse rounded to int8. Element d starts block d / 32, 34 bytes each.
      const int last = p.src_stride[kRank - 1];
      float largest = 0.0;
      for (int j = 0; j < 32; ++j) largest = max(largest, abs(source_value(s + j * last, outside)));
      const float scale = divide(largest, 127.0), inverse = scale != 0.0 ? divide(1.0, scale) : 0.0;
      const uint at = uint(d / 32) * 34u * 8u;  // the block's first bit
      store_bits(at, 16u, f32_to_f16_bits(scale));
      for (int j = 0; j < 32; ++j)
        store_bits(at + 16u + 8u * uint(j), 8u, uint(int(round_away(source_value(s + j * last, outside) * inverse))) & 0xFFu);
    }
  }
}
