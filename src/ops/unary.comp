#version 450
#extension GL_GOOGLE_include_directive : require
// SiLU and GELU over the valid rows of x, f32.
//   specialization constant 0: the function (0 silu, 1 gelu, 2 gelu with tanh)
//   bindings: x, y (f32), the words
layout(local_size_x = 256) in;
layout(constant_id = 0) const int kFunction = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
#define WORDS_BINDING 2
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/math.glsl"

layout(push_constant) uniform Push {
  int x_base, x_offset, y_base, y_offset;
  int rows;  // a word: x's valid rows
  int row_elements;
} p;

void main() {
  const uint n = uint(word(p.rows)) * uint(p.row_elements);
  const uint x0 = uint(p.x_base + word(p.x_offset)), y0 = uint(p.y_base + word(p.y_offset));
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
    const float v = x[x0 + i];
    y[y0 + i] = kFunction == 0 ? silu(v) : (kFunction == 1 ? gelu(v) : gelu_tanh(v));
  }
}
