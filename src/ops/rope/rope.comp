#version 450
#extension GL_GOOGLE_include_directive : require
// RoPE: each row of x (rows, heads, head_dim) turned by its row of the table, every head alike;
// pairs adjacent (2i, 2i+1) or halves (i, i + head_dim/2); the table holds angles (head_dim/2 a
// row) or cosines then sines (head_dim a row). One invocation per pair.
//   specialization constants: 0 halves, 1 the table holds cosines and sines
//   bindings: x, the table, y (f32), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const bool kHalves = false;
layout(constant_id = 1) const bool kCosSin = true;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { float table[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"

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
      c = table[t0 + r * width + i];
      s = table[t0 + r * width + half_d + i];
    } else {
      c = cos(table[t0 + r * width + i]);
      s = sin(table[t0 + r * width + i]);
    }
    const float a = x[x0 + base + first], b = x[x0 + base + second];
    precise float u = a * c - b * s;
    precise float v = a * s + b * c;
    y[y0 + base + first] = u;
    y[y0 + base + second] = v;
  }
}
