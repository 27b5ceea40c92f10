#version 450
#extension GL_GOOGLE_include_directive : require
// RMSNorm and LayerNorm: each row of N entries of x normalised (times a weight row when weighted).
// A workgroup per row, its 64 invocations summing strided entries, then a tree in shared memory.
// f32 arithmetic over x, the weight and y of f32, f16 or bf16.
//   specialization constants: 0 the norm (0 rms, 1 layer), 1 weighted, 2-4 the kinds of x, the
//   weight and y (elements.glsl)
//   bindings: x, the weight, y (words), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kNorm = 0;
layout(constant_id = 1) const bool kWeighted = false;
layout(constant_id = 2) const int kX = 0;
layout(constant_id = 3) const int kG = 0;
layout(constant_id = 4) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { uint g_words[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y_words[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x_words)
ELEMENT_LOAD(load_g, g_words)
ELEMENT_STORE(store_y, y_words)

layout(push_constant) uniform Push {
  int x_base, x_offset, g_base, g_offset, y_base, y_offset;
  int rows;          // a word: x's valid rows
  int rows_per_row;  // rows of N in one row of x (heads normalised apart)
  int n;
  float epsilon;
} p;

shared float partial[64];

// The sum of `v` over the workgroup, in every invocation.
float workgroup_sum(float v) {
  const uint t = gl_LocalInvocationID.x;
  partial[t] = v;
  barrier();
  for (uint half_size = 32u; half_size > 0u; half_size >>= 1) {
    if (t < half_size) partial[t] += partial[t + half_size];
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint n = uint(p.n), t = gl_LocalInvocationID.x;
  const uint rows = uint(word(p.rows)) * uint(p.rows_per_row);
  const uint x0 = uint(p.x_base + word(p.x_offset)), y0 = uint(p.y_base + word(p.y_offset));
  const uint g0 = uint(p.g_base + word(p.g_offset));
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    const uint at = r * n;
    float mean = 0.0;
    if (kNorm == 1) {
      float s = 0.0;
      for (uint i = t; i < n; i += 64u) s += load_x(kX, x0 + at + i);
      mean = workgroup_sum(s) / float(n);
    }
    float ss = 0.0;
    for (uint i = t; i < n; i += 64u) {
      const float d = load_x(kX, x0 + at + i) - mean;
      ss += d * d;
    }
    const float scale = inversesqrt(workgroup_sum(ss) / float(n) + p.epsilon);
    for (uint i = t; i < n; i += 64u)
      store_y(kY, y0 + at + i, (load_x(kX, x0 + at + i) - mean) * scale * (kWeighted ? load_g(kG, g0 + i) : 1.0));
  }
}
