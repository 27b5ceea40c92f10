#version 450
#extension GL_GOOGLE_include_directive : require
// SiLU and GELU over the valid rows of x, computed in f32 from x's kind into y's.
//   specialization constants: 0 the function (0 silu, 1 gelu, 2 gelu with tanh), 1 x's kind,
//   2 y's (elements.glsl)
//   bindings: x, y (words), the words
layout(local_size_x = 256) in;
layout(constant_id = 0) const int kFunction = 0;
layout(constant_id = 1) const int kX = 0;
layout(constant_id = 2) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) buffer Y { uint y[]; };
#define WORDS_BINDING 2
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/math.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x)
ELEMENT_STORE(store_y, y)

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
    const float v = load_x(kX, x0 + i);
    store_y(kY, y0 + i, kFunction == 0 ? silu(v) : (kFunction == 1 ? gelu(v) : gelu_tanh(v)));
  }
}
