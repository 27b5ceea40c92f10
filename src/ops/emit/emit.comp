#version 450
#extension GL_GOOGLE_include_directive : require
// Emit, one carried value: the element of a one-element handle (i32, or a float truncated), or a
// word, into entry `item` of the emitted i32s.
//   specialization constants: 0 from a handle, 1 the handle's kind (load.glsl)
//   bindings: the handle (raw words), the emitted values (i32), the words
layout(local_size_x = 1) in;
layout(constant_id = 0) const bool kFromHandle = true;
layout(constant_id = 1) const int kKind = 6;

layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { int dst[]; };
#define WORDS_BINDING 2
#include "devices/vulkan/shaders/words.glsl"
#define RAW src
#include "devices/vulkan/shaders/load.glsl"

layout(push_constant) uniform Push {
  int src_base, src_offset, dst_base, dst_offset;
  int item;
  int value;  // a word, when not from a handle
} p;

void main() {
  int v;
  if (!kFromHandle) v = word(p.value);
  else if (kKind == 6) v = int(src[p.src_base + word(p.src_offset)]);
  else v = int(trunc(load(kKind, uint(p.src_base + word(p.src_offset)))));
  dst[p.dst_base + word(p.dst_offset) + p.item] = v;
}
