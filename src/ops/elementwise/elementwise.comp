#version 450
#extension GL_GOOGLE_include_directive : require
// Add, Sub, Mul, Div, SwiGLU and GeGLU: y = a op b in f32, where b has a's shape or is one row
// broadcast to every row; each operand f32, f16 or bf16. The valid rows come from a word (a
// prefill chunk's bound).
//   specialization constants: 0 the operation (0 add, 1 sub, 2 mul, 3 div, 4 silu_mul, 5
//   gelu_tanh_mul: the GELU shader's tanh form, as GELU then Mul), 1-3 the
//   kinds of a, b and y (elements.glsl)
//   bindings: a, b, y (words), the words
layout(local_size_x = 256) in;
layout(constant_id = 0) const int kOperation = 0;
layout(constant_id = 1) const int kA = 0;
layout(constant_id = 2) const int kB = 0;
layout(constant_id = 3) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
#include "devices/vulkan/shaders/math.glsl"
ELEMENT_LOAD(load_a, a)
ELEMENT_LOAD(load_b, b)
ELEMENT_STORE(store_y, y)

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
    const float x = load_a(kA, a0 + i);
    const float z = load_b(kB, b0 + (p.width > 0 ? i % uint(p.width) : i));
    precise float r;
    if (kOperation == 0) r = x + z;
    else if (kOperation == 1) r = x - z;
    else if (kOperation == 2) r = x * z;
    else if (kOperation == 3) r = x / z;
    else if (kOperation == 4) r = x / (1.0 + exp(-x)) * z;
    else r = gelu_tanh(x) * z;
    store_y(kY, y0 + i, r);
  }
}
