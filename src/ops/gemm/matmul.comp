#version 450
#extension GL_GOOGLE_include_directive : require
// GEMM, ProjectionGEMM and GEMV: y[m, n] = epilogue(sum_k a[m, k] * W[n, k]) (+ r[m, n]), with
// a's rows through an RMSNorm first where the planner folded one in. One invocation per output,
// its sum over k in f32 in order; W in its checkpoint format, dequantised here (load.glsl).
//   specialization constants: 0 W's dtype (0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1),
//   1 the epilogue (0 none, 1 relu, 2 silu, 3 gelu, 4 gelu_tanh), 2 a residual, 3 the norm
//   (0 none, 1 unweighted, 2 weighted), 4 W is (N, K) (else (K, N), float kinds only)
//   bindings: a (f32), W (raw words), y (f32), r (f32), the norm's weight (f32), the words
layout(local_size_x = 64) in;
layout(constant_id = 0) const int kWeight = 0;
layout(constant_id = 1) const int kEpilogue = 0;
layout(constant_id = 2) const bool kResidual = false;
layout(constant_id = 3) const int kNorm = 0;
layout(constant_id = 4) const bool kColumnMajor = true;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 3) readonly buffer R { float r[]; };
layout(std430, set = 0, binding = 4) readonly buffer G { float g[]; };
#define WORDS_BINDING 5
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/math.glsl"
#define RAW w
#include "devices/vulkan/shaders/load.glsl"

layout(push_constant) uniform Push {
  int a_base, a_offset, w_base, w_offset, y_base, y_offset, r_base, r_offset, g_base, g_offset;
  int k, n;
  int rows;  // a word: a's valid rows
  float epsilon;
} p;

float finish(float v) {
  if (kEpilogue == 1) return max(v, 0.0);
  if (kEpilogue == 2) return silu(v);
  if (kEpilogue == 3) return gelu(v);
  if (kEpilogue == 4) return gelu_tanh(v);
  return v;
}

void main() {
  const uint n = gl_GlobalInvocationID.x, m = gl_WorkGroupID.y;
  const uint k = uint(p.k), width = uint(p.n);
  if (n >= width || m >= uint(word(p.rows))) return;
  const uint a0 = uint(p.a_base + word(p.a_offset)) + m * k;
  const uint w0 = uint(p.w_base + word(p.w_offset));
  float scale = 1.0;
  if (kNorm != 0) {
    float ss = 0.0;
    for (uint i = 0; i < k; ++i) ss += a[a0 + i] * a[a0 + i];
    scale = inversesqrt(ss / float(k) + p.epsilon);
  }
  const uint g0 = uint(p.g_base + word(p.g_offset));
  float sum = 0.0;
  for (uint i = 0; i < k; ++i) {
    float x = a[a0 + i];
    if (kNorm != 0) x = x * scale * (kNorm == 2 ? g[g0 + i] : 1.0);
    sum += x * load(kWeight, kColumnMajor ? w0 + n * k + i : w0 + i * width + n);
  }
  float v = finish(sum);
  if (kResidual) v += r[uint(p.r_base + word(p.r_offset)) + m * width + n];
  y[uint(p.y_base + word(p.y_offset)) + m * width + n] = v;
}
