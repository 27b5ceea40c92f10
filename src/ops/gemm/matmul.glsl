// The matmul shader's body, shared by matmul.comp (a subgroup per workgroup, summed with
// subgroupAdd) and matmul_shared.comp (64 lanes summed through shared memory, for a device
// without subgroup arithmetic). The includer defines LANE, LANES and lane_sum(v) first.
//
// GEMM, ProjectionGEMM and GEMV: y[m, n] = epilogue(sum_k a[m, k] * W[n, k] (+ b[n])) (+ r[m, n]), with
// a's rows through an RMSNorm first where the planner folded one in; f32 sums; W in its
// checkpoint format, dequantised here (load.glsl).
//   specialization constants: 0 W's dtype (load.glsl's kinds: 0 f32 .. 5 q4_1, 7 q5_0 .. 11 q6_k),
//   1 the epilogue (0 none, 1 relu, 2 silu, 3 gelu, 4 gelu_tanh), 2 a residual, 3 the norm
//   (0 none, 1 unweighted, 2 weighted), 4 W is (N, K) (else (K, N), float kinds only), 5 the
//   workgroup size (matmul.comp: the subgroup size), 6 rows of a per workgroup, 7-10 the kinds
//   of a, y, r and the norm's weight (f32, f16 or bf16: elements.glsl), 11 a bias (folded in by
//   the planner), 12 its kind
//   bindings: a, W, y, r, the norm's weight, the bias (words), the words
layout(constant_id = 0) const int kWeight = 0;
layout(constant_id = 1) const int kEpilogue = 0;
layout(constant_id = 2) const bool kResidual = false;
layout(constant_id = 3) const int kNorm = 0;
layout(constant_id = 4) const bool kColumnMajor = true;
layout(constant_id = 7) const int kA = 0;
layout(constant_id = 8) const int kY = 0;
layout(constant_id = 9) const int kR = 0;
layout(constant_id = 10) const int kG = 0;
layout(constant_id = 11) const bool kBias = false;
layout(constant_id = 12) const int kB = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { uint a_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y_words[]; };
layout(std430, set = 0, binding = 3) readonly buffer R { uint r_words[]; };
layout(std430, set = 0, binding = 4) readonly buffer G { uint g_words[]; };
layout(std430, set = 0, binding = 5) readonly buffer B { uint b_words[]; };
#define WORDS_BINDING 6
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/math.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_a, a_words)
ELEMENT_LOAD(load_r, r_words)
ELEMENT_LOAD(load_g, g_words)
ELEMENT_LOAD(load_b, b_words)
ELEMENT_STORE(store_y, y_words)
#define RAW w
#include "devices/vulkan/shaders/load.glsl"

layout(push_constant) uniform Push {
  int a_base, a_offset, w_base, w_offset, y_base, y_offset, r_base, r_offset, g_base, g_offset, b_base, b_offset;
  int k, n;
  int rows;  // a word: a's valid rows
  float epsilon;
} p;

float r_at(uint i) { return load_r(kR, uint(p.r_base + word(p.r_offset)) + i); }

float finish(float v) {
  if (kEpilogue == 1) return max(v, 0.0);
  if (kEpilogue == 2) return silu(v);
  if (kEpilogue == 3) return gelu(v);
  if (kEpilogue == 4) return gelu_tanh(v);
  return v;
}

// Rows of a each workgroup takes: each weight read serves all of them (1 for one row).
layout(constant_id = 6) const uint kTile = 8u;

void main() {
  // A workgroup per output column n and tile of up to kTile rows of a: its lanes take every
  // lane-th k (neighbouring lanes read neighbouring weights), each weight read serving every row
  // of the tile, and lane_sum adds the lanes.
  const uint t = LANE, lanes = LANES;
  const uint k = uint(p.k), width = uint(p.n);
  const uint m0 = gl_WorkGroupID.y * kTile;
  const uint valid = uint(word(p.rows));
  if (m0 >= valid) return;
  const uint tile = min(kTile, valid - m0);
  const uint a0 = uint(p.a_base + word(p.a_offset)) + m0 * k;
  const uint w0 = uint(p.w_base + word(p.w_offset));
  const uint g0 = uint(p.g_base + word(p.g_offset));
  float scale[kTile];
  for (uint r = 0; r < kTile; ++r) scale[r] = 1.0;
  if (kNorm != 0) {
    for (uint r = 0; r < tile; ++r) {
      float ss = 0.0;
      for (uint i = t; i < k; i += lanes) {
        const float x = load_a(kA, a0 + r * k + i);
        ss += x * x;
      }
      scale[r] = inversesqrt(lane_sum(ss) / float(k) + p.epsilon);
    }
  }
  // W's rows by groups of eight elements a lane (load8: a block's scale read once for eight, their
  // bits in two or three words) where the rows are, else element by element (groups of one).
  const bool grouped = kColumnMajor && grouped_kind(kWeight) && k % 8u == 0u && w0 % 8u == 0u;
  const uint group = grouped ? 8u : 1u;
  for (uint n = gl_WorkGroupID.x; n < width; n += gl_NumWorkGroups.x) {
    float sum[kTile];
    for (uint r = 0; r < kTile; ++r) sum[r] = 0.0;
    for (uint i0 = group * t; i0 < k; i0 += group * lanes) {
      float wv[8];
      if (grouped)
        load8(kWeight, w0 + n * k + i0, wv);
      else
        wv[0] = load(kWeight, kColumnMajor ? w0 + n * k + i0 : w0 + i0 * width + n);
      for (uint c = 0u; c < group; ++c) {
        const uint i = i0 + c;
        const float gi = kNorm == 2 ? load_g(kG, g0 + i) : 1.0;
        for (uint r = 0; r < tile; ++r) {
          float x = load_a(kA, a0 + r * k + i);
          if (kNorm != 0) x = x * scale[r] * gi;
          sum[r] += x * wv[c];
        }
      }
    }
    for (uint r = 0; r < tile; ++r) {
      const float total = lane_sum(sum[r]);
      if (t == 0u) {
        const uint m = m0 + r;
        float v = total;
        if (kBias) v += load_b(kB, uint(p.b_base + word(p.b_offset)) + n);
        v = finish(v);
        if (kResidual) v += r_at(m * width + n);
        store_y(kY, uint(p.y_base + word(p.y_offset)) + m * width + n, v);
      }
    }
  }
}
