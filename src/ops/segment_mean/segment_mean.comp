#version 450
#extension GL_GOOGLE_include_directive : require
// SegmentMean: an encoder's mean pooling, as the CPU's kernel (segment_mean.cpp): output row b is
// the mean of the first lengths[b] rows (held to [0, segment]) of segment b of x, zeros for an
// empty one. One invocation per output element. The CPU sums in double; here the sum is
// compensated (Neumaier's: the running error of each f32 addition kept and added back at the
// end), as exact as the double sum to well within the operator's tolerance, and the division is
// corrected from its exact remainder (GLSL's may be 2.5 ulp off).
//   specialization constants: 0 x's kind, 1 y's (f32, f16 or bf16: elements.glsl)
//   bindings: x (words), lengths (i32), y (words), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kX = 0;
layout(constant_id = 1) const int kY = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer L { int lengths[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y_words[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_x, x_words)
ELEMENT_STORE(store_y, y_words)

layout(push_constant) uniform Push {
  int x_base, x_offset, l_base, l_offset, y_base, y_offset;
  int batch, segment, n;
} p;

void main() {
  const uint n = uint(p.n), total = uint(p.batch) * n;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint x0 = uint(p.x_base + word(p.x_offset)), y0 = uint(p.y_base + word(p.y_offset));
  const int l0 = p.l_base + word(p.l_offset);
  for (uint e = gl_GlobalInvocationID.x; e < total; e += stride) {
    const uint b = e / n, i = e % n;
    const int length = clamp(lengths[l0 + int(b)], 0, p.segment);
    float sum = 0.0, error = 0.0;
    for (int r = 0; r < length; ++r) {
      const float v = load_x(kX, x0 + (b * uint(p.segment) + uint(r)) * n + i);
      const float t = sum + v;
      error += abs(sum) >= abs(v) ? (sum - t) + v : (v - t) + sum;
      sum = t;
    }
    sum += error;
    float mean = 0.0;
    if (length > 0) {
      const float q = sum / float(length);
      mean = q + fma(-q, float(length), sum) / float(length);
    }
    store_y(kY, y0 + e, mean);
  }
}
