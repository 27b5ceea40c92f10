#version 450
#extension GL_GOOGLE_include_directive : require
// GEMM, ProjectionGEMM and GEMV: y[m, n] = epilogue(sum_k a[m, k] * W[n, k]) (+ r[m, n]), with
// a's rows through an RMSNorm first where the planner folded one in. One invocation per output,
// its sum over k in f32 in order; W in its checkpoint format, dequantised here (bytes read from
// 32-bit words, so no 8- or 16-bit storage feature is needed).
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

layout(push_constant) uniform Push {
  int a_base, a_offset, w_base, w_offset, y_base, y_offset, r_base, r_offset, g_base, g_offset;
  int k, n;
  int rows;  // a word: a's valid rows
  float epsilon;
} p;

uint byte_at(uint i) { return (w[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
uint half_at(uint i) { return (w[i >> 2] >> ((i & 2u) * 8u)) & 0xffffu; }
float f16_at(uint i) { return unpackHalf2x16(half_at(i)).x; }

// W's element e (counted from its buffer's start).
float weight(uint e) {
  if (kWeight == 0) return uintBitsToFloat(w[e]);
  if (kWeight == 1) return f16_at(2u * e);
  if (kWeight == 2) return uintBitsToFloat(half_at(2u * e) << 16);
  const uint block = e / 32u, j = e % 32u;
  if (kWeight == 3) {  // q8_0: an f16 scale, 32 int8
    const uint at = block * 34u;
    return f16_at(at) * float(int(byte_at(at + 2u + j) << 24) >> 24);
  }
  if (kWeight == 4) {  // q4_0: an f16 scale, 16 bytes of nibbles (low: the first 16), offset 8
    const uint at = block * 18u;
    const uint q = (byte_at(at + 2u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
    return f16_at(at) * float(int(q) - 8);
  }
  // q4_1: an f16 scale and minimum, 16 bytes of nibbles
  const uint at = block * 20u;
  const uint q = (byte_at(at + 4u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 15u;
  return f16_at(at) * float(q) + f16_at(at + 2u);
}

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
    sum += x * weight(kColumnMajor ? w0 + n * k + i : w0 + i * width + n);
  }
  float v = finish(sum);
  if (kResidual) v += r[uint(p.r_base + word(p.r_offset)) + m * width + n];
  y[uint(p.y_base + word(p.y_offset)) + m * width + n] = v;
}
