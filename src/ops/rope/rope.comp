#version 450
#extension GL_GOOGLE_include_directive : require
// RoPE: each row of x (rows, heads, head_dim) turned by its row of the table, every head alike;
// pairs adjacent (2i, 2i+1) or halves (i, i + head_dim/2); the table holds angles (head_dim/2 a
// row) or cosines then sines (head_dim a row). One invocation per pair.
// f32 arithmetic over x, the table and y of f32, f16 or bf16.
//   specialization constants: 0 halves, 1 the table holds cosines and sines, 2-4 the kinds of x,
//   the table and y (elements.glsl)
//   bindings: x, the table, y (words), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const bool kHalves = false;
layout(constant_id = 1) const bool kCosSin = true;
layout(constant_id = 2) const int kX = 0;
layout(constant_id = 3) const int kT = 0;
layout(constant_id = 4) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { uint table_words[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y_words[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x_words)
ELEMENT_LOAD(load_table, table_words)
ELEMENT_STORE(store_y, y_words)

layout(push_constant) uniform Push {
  int x_base, x_offset, t_base, t_offset, y_base, y_offset;
  int rows;  // a word: x's valid rows
  int heads, head_dim;
} p;

void main() {
  const uint d = uint(p.head_dim), half_d = d / 2u, heads = uint(p.heads);
  const uint n = uint(word(p.rows)) * heads * half_d;
  const uint x0 = uint(p.x_base + word(p.x_offset)), y0 = uint(p.y_base + word(p.y_offset));
  const uint t0 = uint(p.t_base + word(p.t_offset));
  const uint width = kCosSin ? d : half_d;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint item = gl_GlobalInvocationID.x; item < n; item += stride) {
    const uint i = item % half_d, row_head = item / half_d, r = row_head / heads;
    const uint base = row_head * d;
    const uint first = kHalves ? i : 2u * i, second = kHalves ? i + half_d : 2u * i + 1u;
    float c, s;
    if (kCosSin) {
      c = load_table(kT, t0 + r * width + i);
      s = load_table(kT, t0 + r * width + half_d + i);
    } else {
      c = cos(load_table(kT, t0 + r * width + i));
      s = sin(load_table(kT, t0 + r * width + i));
    }
    const float a = load_x(kX, x0 + base + first), b = load_x(kX, x0 + base + second);
    precise float u = a * c - b * s;
    precise float v = a * s + b * c;
    store_y(kY, y0 + base + first, u);
    store_y(kY, y0 + base + second, v);
  }
}
