#version 450
#extension GL_GOOGLE_include_directive : require
// Sample, greedy: the first index of the largest non-NaN logit (0 when every one is NaN), as a
// one-element i32. One workgroup: each invocation takes strided logits, then a tree keeps the
// larger value, the lower index on a tie. With per-call settings (has_settings), a row whose
// temperature is above 0 is not sampled here (sampling at a temperature is not on this device
// yet): its token is -1, an id no vocabulary has, and LlamaRunner refuses such settings on
// Vulkan before any call.
//   bindings: the logits (f32), the token (i32), the settings (i32 words, sample.hpp; the
//   logits again when has_settings is 0), the words
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { int y[]; };
layout(std430, set = 0, binding = 2) readonly buffer S { int s[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"

layout(push_constant) uniform Push {
  int x_base, x_offset, y_base, y_offset, s_base, s_offset;
  int n, has_settings;
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
  if (t == 0u) {
    int token = best_index[0] == n ? 0 : int(best_index[0]);
    if (p.has_settings != 0) {
      // The temperature's float64 bits, 16 a word: above 0 when the sign is clear and any other
      // bit is set (the host refuses NaN; the CPU reads one as greedy, as here).
      const uint s0 = uint(p.s_base + word(p.s_offset));
      const uint hi = (uint(s[s0 + 3u]) & 0xFFFFu) << 16 | (uint(s[s0 + 2u]) & 0xFFFFu);
      const uint lo = (uint(s[s0 + 1u]) & 0xFFFFu) << 16 | (uint(s[s0]) & 0xFFFFu);
      const bool nan = (hi & 0x7FF00000u) == 0x7FF00000u && ((hi & 0xFFFFFu) != 0u || lo != 0u);
      if ((hi >> 31) == 0u && (hi != 0u || lo != 0u) && !nan) token = -1;
    }
    y[p.y_base + word(p.y_offset)] = token;
  }
}
