#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax over the last axis (rows of N), times `scale` first; the leading `len` entries (a word)
// take part, the rest of each row is written as zero. A workgroup per row; f32 arithmetic over
// x and y of f32, f16 or bf16.
//   specialization constants: 0 x's kind, 1 y's (elements.glsl)
//   bindings: x, y (words), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kX = 0;
layout(constant_id = 1) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x_words[]; };
layout(std430, set = 0, binding = 1) buffer Y { uint y_words[]; };
#define WORDS_BINDING 2
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x_words)
ELEMENT_STORE(store_y, y_words)

layout(push_constant) uniform Push {
  int x_base, x_offset, y_base, y_offset;
  int rows;          // a word: x's valid rows
  int rows_per_row;  // rows of N in one row of x
  int n;
  int valid;  // a word: the valid entries of each row
  float scale;
} p;

shared float partial[64];

float workgroup_reduce(float v, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  partial[t] = v;
  barrier();
  for (uint half_size = 32u; half_size > 0u; half_size >>= 1) {
    if (t < half_size) partial[t] = take_max ? max(partial[t], partial[t + half_size]) : partial[t] + partial[t + half_size];
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint n = uint(p.n), t = gl_LocalInvocationID.x;
  const uint rows = uint(word(p.rows)) * uint(p.rows_per_row);
  const uint len = uint(word(p.valid));
  const uint x0 = uint(p.x_base + word(p.x_offset)), y0 = uint(p.y_base + word(p.y_offset));
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    const uint at = r * n;
    float top = -3.402823466e38;
    for (uint i = t; i < len; i += 64u) top = max(top, load_x(kX, x0 + at + i) * p.scale);
    top = workgroup_reduce(top, true);
    float sum = 0.0;
    for (uint i = t; i < len; i += 64u) sum += exp(load_x(kX, x0 + at + i) * p.scale - top);
    sum = workgroup_reduce(sum, false);
    for (uint i = t; i < n; i += 64u) store_y(kY, y0 + at + i, i < len ? exp(load_x(kX, x0 + at + i) * p.scale - top) / sum : 0.0);
  }
}
