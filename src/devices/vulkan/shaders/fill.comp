#version 450
// Writes `value` into `count` 32-bit words of a buffer from word `first`: zeroing an arena or a
// state before its first use, and a sentinel in the runtime's tests.
//   specialization constant 0: the workgroup size (64 unless given)
//   binding 0: the words
//   push constants: first, count, value

layout(local_size_x = 64, local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer Words { uint words[]; };

layout(push_constant) uniform Push {
  uint first;
  uint count;
  uint value;
} push;

void main() {
  // A grid-stride loop: any number of workgroups covers any count, so a dispatch never needs
  // more groups than maxComputeWorkGroupCount allows. Dispatch enough that no invocation loops
  // more than 65535 times: lavapipe (llvmpipe) silently ends a loop nest there.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < push.count; i += stride) words[push.first + i] = push.value;
}
