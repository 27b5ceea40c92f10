#version 450
#extension GL_GOOGLE_include_directive : require
// Scalar: the sum of up to 8 words into a one-element i32 (a carried value made of two per-call
// values, such as a prefill chunk's next position).
//   bindings: y (i32), the words
layout(local_size_x = 1) in;

layout(std430, set = 0, binding = 0) writeonly buffer Y { int y[]; };
#define WORDS_BINDING 1
#include "devices/vulkan/shaders/words.glsl"

layout(push_constant) uniform Push {
  int y_base, y_offset;
  int count;
  int terms[8];  // words
} p;

void main() {
  int sum = 0;
  for (int i = 0; i < p.count; ++i) sum += word(p.terms[i]);
  y[p.y_base + word(p.y_offset)] = sum;
}
