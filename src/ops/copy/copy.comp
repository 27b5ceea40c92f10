#version 450
#extension GL_GOOGLE_include_directive : require
// Copy, Gather and Transpose: any view of rank 1 to 4 into any view, rows gathered by per-call
// ids (an id outside the table writes zeros, as on the CPU), every kind load.glsl reads in, f32 or
// i32 out. The extent on each axis is what both views hold valid this call. One invocation per
// element, in a grid-stride loop.
//   specialization constants: 0 the source's kind, 1 the destination's (0 f32, 6 i32), 2 rank,
//   3 gathered by ids
//   bindings: source (raw words), destination (words), ids (i32), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kSource = 0;
layout(constant_id = 1) const int kTarget = 0;
layout(constant_id = 2) const int kRank = 1;
layout(constant_id = 3) const bool kGathered = false;

layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { uint dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { int ids[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"
#define RAW src
#include "devices/vulkan/shaders/load.glsl"

layout(push_constant) uniform Push {
  int src_base, src_offset, dst_base, dst_offset, ids_base, ids_offset;
  int table_rows;
  int src_valid[4], dst_valid[4];  // words: each axis's valid entries
  int src_stride[4], dst_stride[4];  // (int arrays: std430 packs them as the C++ struct does)
} p;

void main() {
  uint extent[4];
  uint n = 1;
  for (int a = 0; a < kRank; ++a) {
    extent[a] = uint(min(word(p.src_valid[a]), word(p.dst_valid[a])));
    n *= extent[a];
  }
  const int s0 = p.src_base + word(p.src_offset), d0 = p.dst_base + word(p.dst_offset);
  const int i0 = p.ids_base + word(p.ids_offset);
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint item = gl_GlobalInvocationID.x; item < n; item += stride) {
    int s = s0, d = d0;
    uint rest = item;
    bool outside = false;
    for (int a = kRank - 1; a >= 0; --a) {
      int index = int(rest % extent[a]);
      rest /= extent[a];
      d += index * p.dst_stride[a];
      if (a == 0 && kGathered) {
        index = ids[i0 + index];
        outside = index < 0 || index >= p.table_rows;
      }
      s += index * p.src_stride[a];
    }
    if (kTarget == 6)
      dst[d] = outside ? 0u : (kSource == 6 ? src[s] : uint(int(load(kSource, uint(s)))));
    else
      dst[d] = floatBitsToUint(outside ? 0.0 : load(kSource, uint(s)));
  }
}
