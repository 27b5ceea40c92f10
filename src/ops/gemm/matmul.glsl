// The matmul shader's body, shared by matmul.comp (a subgroup per workgroup, summed with
// subgroupAdd) and matmul_shared.comp (64 lanes summed through shared memory, for a device
// without subgroup arithmetic). The includer defines LANE, LANES and lane_sum(v) first, and
// LANE_BROADCAST(v, lane) where its lanes can share values (lanes over columns then read each of
// a's elements once a subgroup).
//
// GEMM, ProjectionGEMM and GEMV: y[m, n] = epilogue(sum_k a[m, k] * W[n, k] (+ b[n])) (+ r[m, n]), with
// a's rows through an RMSNorm first where the planner folded one in; f32 sums; W in its
// checkpoint format, dequantised here (load.glsl).
//   specialization constants: 0 W's dtype (load.glsl's kinds: 0 f32 .. 5 q4_1, 7 q5_0 .. 11 q6_k),
//   1 the epilogue (0 none, 1 relu, 2 silu, 3 gelu, 4 gelu_tanh), 2 a residual, 3 the norm
//   (0 none, 1 unweighted, 2 weighted), 4 W is (N, K) (else (K, N), float kinds only), 5 the
//   workgroup size (matmul.comp: the subgroup size), 6 rows of a per workgroup, 7-10 the kinds
//   of a, y, r and the norm's weight (f32, f16 or bf16: elements.glsl), 11 a bias (folded in by
//   the planner), 12 its kind, 13 lanes over columns (below)
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
// How a workgroup's lanes share the work. Over k (false): the workgroup takes one output column,
// neighbouring lanes read neighbouring elements of W's row and of a's, and lane_sum adds their
// sums: coalesced reads, the GEMV's form on a GPU. Over columns (true): each lane takes its own
// output column and walks all of k, so every lane reads the same element of a (one read serves
// the subgroup, and a tile of a's rows serves `lanes` columns) and no sum crosses lanes: the form
// for a device whose lanes are a CPU's SIMD lanes (lavapipe), where the other form's reads, 8
// elements apart a lane, are gathers, one per multiply-add. gemm_vulkan.cpp chooses.
layout(constant_id = 13) const bool kLanesOverColumns = false;

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

// a's element i of row r of the tile, normed where a norm is folded in (gi: the norm's weight
// of element i).
float a_at(uint r, uint i, uint a0, uint k, uint tile, float scale_r, float gi) {
  const float x = load_a(kA, a0 + min(r, tile - 1u) * k + i);
  return kNorm != 0 ? x * scale_r * gi : x;
}

// Adds w times a's element i of each row of the tile (normed where a norm is folded in) to the
// row's sum. Rows are counted to kTile, a constant, so the sums stay in registers (an array
// indexed by a loop bound known only at run time is memory on some compilers, lavapipe's among
// them); rows past a short tile repeat its last row and are never stored.
void accumulate(inout float sum[kTile], float w, uint i, uint a0, uint k, uint tile, uint g0, float scale[kTile]) {
  const float gi = kNorm == 2 ? load_g(kG, g0 + i) : 1.0;
  for (uint r = 0u; r < kTile; ++r) sum[r] += a_at(r, i, a0, k, tile, scale[r], gi) * w;
}

#ifdef LANE_BROADCAST
// Over columns, a's elements i0 .. i0 + 7 of each row of the tile times W's eight values of this
// lane's column: each of the subgroup's lanes reads one element (lane t element t % 8) and
// LANE_BROADCAST shares them, where every lane reading all eight itself is, on a CPU's SIMD
// lanes (lavapipe), a gather per element. Each row's sum adds the same products in the same
// order as accumulate() over the eight, so the same bits.
void accumulate_shared8(inout float sum[kTile], const float wv[8], uint i0, uint a0, uint k, uint tile, uint g0,
                        float scale[kTile]) {
  const uint c = LANE % 8u;
  const float gi = kNorm == 2 ? load_g(kG, g0 + i0 + c) : 1.0;
  // Written out eight times: subgroupBroadcast's lane must be a constant expression, which a
  // loop's index is not.
  for (uint r = 0u; r < kTile; ++r) {
    const float x = a_at(r, i0 + c, a0, k, tile, scale[r], gi);
    sum[r] += LANE_BROADCAST(x, 0u) * wv[0];
    sum[r] += LANE_BROADCAST(x, 1u) * wv[1];
    sum[r] += LANE_BROADCAST(x, 2u) * wv[2];
    sum[r] += LANE_BROADCAST(x, 3u) * wv[3];
    sum[r] += LANE_BROADCAST(x, 4u) * wv[4];
    sum[r] += LANE_BROADCAST(x, 5u) * wv[5];
    sum[r] += LANE_BROADCAST(x, 6u) * wv[6];
    sum[r] += LANE_BROADCAST(x, 7u) * wv[7];
  }
}
#endif

void main() {
  // A workgroup per tile of up to kTile rows of a and per output column (lanes over k) or per
  // `lanes` columns (lanes over columns): each weight read serves every row of the tile.
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
  for (uint r = 0u; r < kTile; ++r) scale[r] = 1.0;
  if (kNorm != 0) {
    for (uint r = 0u; r < kTile; ++r) {
      float ss = 0.0;
      for (uint i = t; i < k; i += lanes) {
        const float x = load_a(kA, a0 + min(r, tile - 1u) * k + i);
        ss += x * x;
      }
      scale[r] = inversesqrt(lane_sum(ss) / float(k) + p.epsilon);
    }
  }
  // W's rows by groups of eight elements (load8: a block's scale read once for eight, their bits
  // in two or three words) where the rows are, else element by element (groups of one).
  const bool grouped = kColumnMajor && grouped_kind(kWeight) && k % 8u == 0u && w0 % 8u == 0u;
  const uint group = grouped ? 8u : 1u;
  // Over k: column n is the workgroup's, lane t starts at group t of the row. Over columns: lane t's
  // column is n + t, and it starts at the row's start.
  const uint first = kLanesOverColumns ? gl_WorkGroupID.x * lanes : gl_WorkGroupID.x;
  const uint stride = kLanesOverColumns ? gl_NumWorkGroups.x * lanes : gl_NumWorkGroups.x;
  const uint own = kLanesOverColumns ? t : 0u;
  const uint i_first = kLanesOverColumns ? 0u : group * t, i_step = kLanesOverColumns ? group : group * lanes;
#ifdef LANE_BROADCAST
  // Whether the lanes share a's elements (over columns): then a lane past the last column still
  // reads (the last column's W) and shares a's elements, which the others take from it; it
  // stores nothing.
  const bool shares = kLanesOverColumns && LANES >= 8u;
#else
  const bool shares = false;
#endif
  for (uint n0 = first; n0 < width; n0 += stride) {
    const uint n = n0 + own;
    if (kLanesOverColumns && n >= width && !shares) break;  // this lane's later columns are past the end too
    const uint n_read = min(n, width - 1u);
    float sum[kTile];
    for (uint r = 0u; r < kTile; ++r) sum[r] = 0.0;
    for (uint i0 = i_first; i0 < k; i0 += i_step) {
      if (grouped) {
        float wv[8];
        load8(kWeight, w0 + n_read * k + i0, wv);
#ifdef LANE_BROADCAST
        if (shares) {
          accumulate_shared8(sum, wv, i0, a0, k, tile, g0, scale);
          continue;
        }
#endif
        for (uint c = 0u; c < 8u; ++c) accumulate(sum, wv[c], i0 + c, a0, k, tile, g0, scale);
      } else {
        accumulate(sum, load(kWeight, kColumnMajor ? w0 + n_read * k + i0 : w0 + i0 * width + n_read), i0, a0, k, tile,
                   g0, scale);
      }
    }
    for (uint r = 0u; r < kTile; ++r) {
      const float total = kLanesOverColumns ? sum[r] : lane_sum(sum[r]);
      if (r < tile && (kLanesOverColumns || t == 0u) && n < width) {
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
