#version 450
#extension GL_GOOGLE_include_directive : require
// Add, Sub, Mul, Div and SwiGLU over f32: y = a op b, where b has a's shape or is one row
// broadcast to every row. The valid rows come from a word (a prefill chunk's bound).
//   specialization constant 0: the operation (0 add, 1 sub, 2 mul, 3 div, 4 silu_mul)
//   bindings: a, b, y (f32), the words
layout(local_size_x = 256) in;
layout(constant_id = 0) const int kOperation = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"

layout(push_constant) uniform Push {
  int a_base, a_offset, b_base, b_offset, y_base, y_offset;
  int rows;          // a word: y's valid rows
  int row_elements;  // elements of one row of y
  int width;         // b's elements when it is a broadcast row, else 0
} p;

void main() {
  const uint n = uint(word(p.rows)) * uint(p.row_elements);
  const uint a0 = uint(p.a_base + word(p.a_offset));
  const uint b0 = uint(p.b_base + word(p.b_offset));
  const uint y0 = uint(p.y_base + word(p.y_offset));
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
    const float x = a[a0 + i];
    const float z = b[b0 + (p.width > 0 ? i % uint(p.width) : i)];
    precise float r;
    if (kOperation == 0) r = x + z;
    else if (kOperation == 1) r = x - z;
    else if (kOperation == 2) r = x * z;
    else if (kOperation == 3) r = x / z;
    else r = x / (1.0 + exp(-x)) * z;
    y[y0 + i] = r;
  }
}
