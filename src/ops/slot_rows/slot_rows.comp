#version 450
#extension GL_GOOGLE_include_directive : require
// SlotRows: each batched-decode row's cache row, rows[b] = slots[b] * slot_rows + positions[b],
// or -1 (a row no scatter writes) where the slot or the position is outside its range; as the
// CPU's kernel (slot_rows.cpp). One invocation per row.
//   bindings: slots, positions, rows (i32 each), the words
layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer S { int slots[]; };
layout(std430, set = 0, binding = 1) readonly buffer P { int positions[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { int rows[]; };
#define WORDS_BINDING 3
#include "devices/vulkan/shaders/words.glsl"

layout(push_constant) uniform Push {
  int s_base, s_offset, p_base, p_offset, y_base, y_offset;
  int batch;  // rows
  int count, slot_rows;  // the cache's slots, and the rows of each
} p;

void main() {
  const int b = int(gl_GlobalInvocationID.x);
  if (b >= p.batch) return;
  const int slot = slots[p.s_base + word(p.s_offset) + b], position = positions[p.p_base + word(p.p_offset) + b];
  const bool inside = slot >= 0 && slot < p.count && position >= 0 && position < p.slot_rows;
  rows[p.y_base + word(p.y_offset) + b] = inside ? slot * p.slot_rows + position : -1;
}
