#version 450
#extension GL_GOOGLE_include_directive : require
// Attention: causal grouped-query attention of q (rows, heads, head_dim) over the caches (ctx,
// kv_heads, head_dim). Query row r sits at position start + r (a word) and attends to cache rows
// [0, min(start + r + 1, ctx, the caches' valid rows)). A workgroup of 32 per (row, head): each
// invocation keeps an online softmax (running maximum, sum, weighted values) over every 32nd
// key, then the 32 are merged in shared memory. f32 arithmetic; the caches f32, f16, bf16 or q8_0
// (a KV cache's types), converted as they are read.
// q and y are f32, f16 or bf16. With slot_rows R > 0 it is a batched decode over caches of
// ctx / R slots of R rows: query row r sits at position positions[r] of slot slots[r] and attends
// to cache rows [slots[r] R, slots[r] R + positions[r]] (the window's last of them, with one); a
// slot or position outside its range gives zeros, as on the CPU. With segment S > 0 it is an
// encoder's bidirectional attention over a padded batch: row r of segment b = r / S attends to
// every one of the segment's first lengths[b] rows (held to [0, S]; with a window, those less
// than window rows from r), and a padding row (r - bS >= lengths[b]) gives zeros.
//   specialization constants: 0 head_dim (at most 128), 1 the keys' kind, 2 the values' (0 f32,
//   1 f16, 2 bf16, 3 q8_0: load.glsl's numbers), 3 q's kind, 4 y's (elements.glsl), 5 slot_rows
//   (0: one sequence), 6 segment (0: causal)
//   bindings: q, k_cache, v_cache, y (words), positions (or the segments' lengths), slots (i32;
//   q again where unused), the words
layout(local_size_x = 32) in;
layout(constant_id = 0) const int kHeadDim = 64;
layout(constant_id = 1) const int kKeyKind = 0;
layout(constant_id = 2) const int kValueKind = 0;
layout(constant_id = 3) const int kQ = 0;
layout(constant_id = 4) const int kY = 0;
layout(constant_id = 5) const int kSlotRows = 0;
layout(constant_id = 6) const int kSegment = 0;

layout(std430, set = 0, binding = 0) readonly buffer Q { uint q_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { uint kc[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { uint vc[]; };
layout(std430, set = 0, binding = 3) buffer Y { uint y_words[]; };
layout(std430, set = 0, binding = 4) readonly buffer P { int positions[]; };
layout(std430, set = 0, binding = 5) readonly buffer S { int slots[]; };
#define WORDS_BINDING 6
#include "devices/vulkan/shaders/words.glsl"
#include "devices/vulkan/shaders/elements.glsl"
ELEMENT_LOAD(load_q, q_words)
ELEMENT_STORE(store_y, y_words)

layout(push_constant) uniform Push {
  int q_base, q_offset, k_base, k_offset, v_base, v_offset, y_base, y_offset;
  int rows;        // a word: q's valid rows
  int start;       // a word: the position of q's row 0
  int k_rows, v_rows;  // words: the caches' valid rows
  int heads, kv_heads, ctx;
  float scale;
  int window;      // a sliding window's keys (0: every earlier position)
  int p_base, p_offset, s_base, s_offset;  // positions and slots, with slot_rows
} p;

// Element e of a cache of `kind`, from its 32-bit words (load.glsl holds one array per shader;
// this one reads two). f16 and bf16 are halves of a word; a q8_0 block is an f16 scale and 32
// int8, 34 bytes.
#define CACHE_LOAD(NAME, RAW)                                                      \
  float NAME(int kind, uint e) {                                                  \
    if (kind == 0) return uintBitsToFloat(RAW[e]);                                \
    if (kind == 1) return unpackHalf2x16(RAW[e >> 1] >> ((e & 1u) * 16u)).x;      \
    if (kind == 2) return uintBitsToFloat((RAW[e >> 1] >> ((e & 1u) * 16u)) << 16); \
    const uint at = (e / 32u) * 34u, b = at + 2u + e % 32u;                       \
    const float scale = unpackHalf2x16(RAW[at >> 2] >> ((at & 2u) * 8u)).x;       \
    return scale * float(int(RAW[b >> 2] << (24u - (b & 3u) * 8u)) >> 24);        \
  }
CACHE_LOAD(key_at, kc)
CACHE_LOAD(value_at, vc)

shared float shared_max[32], shared_sum[32];
shared float shared_acc[32 * kHeadDim];

void main() {
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, r = gl_WorkGroupID.y;
  if (r >= uint(word(p.rows))) return;  // the whole workgroup leaves together
  const int d = kHeadDim;
  const int g = int(h) / (p.heads / p.kv_heads);
  int position = word(p.start) + int(r);
  int keys = max(0, min(min(position + 1, p.ctx), min(word(p.k_rows), word(p.v_rows))));
  int first = p.window > 0 ? max(0, position - p.window + 1) : 0;
  if (kSlotRows > 0) {
    // Its slot's rows up to its position, as absolute cache rows (none when out of range).
    const int slot = slots[p.s_base + word(p.s_offset) + int(r)];
    position = positions[p.p_base + word(p.p_offset) + int(r)];
    const bool inside = slot >= 0 && slot < p.ctx / kSlotRows && position >= 0 && position < kSlotRows;
    keys = inside ? slot * kSlotRows + min(position + 1, kSlotRows) : 0;
    first = inside ? slot * kSlotRows + (p.window > 0 ? max(0, position - p.window + 1) : 0) : 0;
  }
  if (kSegment > 0) {
    // Its segment's valid rows, as the CPU's segment_keys (none for a padding row).
    first = int(r) / kSegment * kSegment;
    const int length = clamp(positions[p.p_base + word(p.p_offset) + int(r) / kSegment], 0, kSegment);
    const int cache_rows = min(word(p.k_rows), word(p.v_rows));
    keys = int(r) - first >= length ? first : max(first, min(first + length, cache_rows));
    if (p.window > 0 && keys > first) {  // the rows less than window from r, either way
      first = max(first, int(r) - p.window + 1);
      keys = max(first, min(keys, int(r) + p.window));
    }
  }
  const uint q0 = uint(p.q_base + word(p.q_offset)) + (r * uint(p.heads) + h) * uint(d);
  const uint y0 = uint(p.y_base + word(p.y_offset)) + (r * uint(p.heads) + h) * uint(d);
  if (keys <= first) {
    for (int i = int(t); i < d; i += 32) store_y(kY, y0 + uint(i), 0.0);
    return;
  }
  const uint k0 = uint(p.k_base + word(p.k_offset)), v0 = uint(p.v_base + word(p.v_offset));
  float query[kHeadDim], acc[kHeadDim];
  for (int i = 0; i < d; ++i) {
    query[i] = load_q(kQ, q0 + uint(i)) * p.scale;
    acc[i] = 0.0;
  }
  float m = -1.0 / 0.0, l = 0.0;
  for (int j = first + int(t); j < keys; j += 32) {
    const uint at = uint((j * p.kv_heads + g) * d);
    float score = 0.0;
    for (int i = 0; i < d; ++i) score += query[i] * key_at(kKeyKind, k0 + at + uint(i));
    const float next = max(m, score);
    const float shrink = exp(m - next);  // 0 on the first key
    const float e = exp(score - next);
    l = l * shrink + e;
    for (int i = 0; i < d; ++i) acc[i] = acc[i] * shrink + e * value_at(kValueKind, v0 + at + uint(i));
    m = next;
  }
  shared_max[t] = m;
  shared_sum[t] = l;
  for (int i = 0; i < d; ++i) shared_acc[t * uint(d) + uint(i)] = acc[i];
  barrier();
  float top = -1.0 / 0.0;
  for (uint u = 0u; u < 32u; ++u) top = max(top, shared_max[u]);
  float total = 0.0;
  for (uint u = 0u; u < 32u; ++u) total += shared_sum[u] * exp(shared_max[u] - top);
  for (int i = int(t); i < d; i += 32) {
    float v = 0.0;
    for (uint u = 0u; u < 32u; ++u)
      if (shared_sum[u] > 0.0) v += shared_acc[u * uint(d) + uint(i)] * exp(shared_max[u] - top);
    store_y(kY, y0 + uint(i), v / total);
  }
}
