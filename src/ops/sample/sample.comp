#version 450
#extension GL_GOOGLE_include_directive : require
// Sample, greedy: the first index of the largest non-NaN logit (0 when every one is NaN), as a
// one-element i32. One workgroup: each invocation takes strided logits, then a tree keeps the
// larger value, the lower index on a tie.
//   bindings: the logits (f32), the token (i32), the words
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { int y[]; };
#define WORDS_BINDING 2
#include "devices/vulkan/shaders/words.glsl"

layout(push_constant) uniform Push {
  int x_base, x_offset, y_base, y_offset;
  int n;
} p;

shared float best_value[256];
shared uint best_index[256];

void main() {
  const uint t = gl_LocalInvocationID.x, n = uint(p.n);
  const uint x0 = uint(p.x_base + word(p.x_offset));
  float best = -1.0 / 0.0;  // -inf: a logit of -inf still wins over "none" (index n)
  uint at = n;
  for (uint i = t; i < n; i += 256u) {
    const float v = x[x0 + i];
    if (v > best || (v == best && at == n)) {  // NaN compares false: it never wins
      best = v;
      at = i;
    }
  }
  best_value[t] = best;
  best_index[t] = at;
  barrier();
  for (uint half_size = 128u; half_size > 0u; half_size >>= 1) {
    if (t < half_size) {
      const float v = best_value[t + half_size];
      const uint i = best_index[t + half_size];
      if (i < n && (best_index[t] == n || v > best_value[t] || (v == best_value[t] && i < best_index[t]))) {
        best_value[t] = v;
        best_index[t] = i;
      }
    }
    barrier();
  }
  if (t == 0u) y[p.y_base + word(p.y_offset)] = best_index[0] == n ? 0 : int(best_index[0]);
}
