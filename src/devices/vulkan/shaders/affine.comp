#version 450
// y[i] = a * x[i] + b over the elements [first, first + count), where `first` and `count` are
// per-call words read from a buffer the host rewrites before each submit, and a, b are push
// constants fixed when the command list is recorded. The shape of every operator shader to come:
// what changes per call is read from the words buffer, never recorded, so the commands are
// recorded once. The runtime's tests run it.
//   specialization constant 0: the workgroup size (64 unless given)
//   specialization constant 1: the index of `first` in the words buffer (`count` follows it),
//                              so kernels of one image share one words buffer
//   binding 0: x (f32)   binding 1: y (f32)   binding 2: the per-call words (i32)
//   push constants: a, b (f32)

layout(local_size_x = 64, local_size_x_id = 0) in;
layout(constant_id = 1) const uint kFirstWord = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 2) readonly buffer Words { int words[]; };

layout(push_constant) uniform Push {
  float a;
  float b;
} push;

void main() {
  const uint first = uint(words[kFirstWord]);
  const uint count = uint(words[kFirstWord + 1]);
  // A grid-stride loop, as in fill.comp (at most 65535 turns per invocation on lavapipe).
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < count; i += stride) {
    // precise: a multiply and an add, each rounded, as the CPU computes it (no fused multiply-add).
    precise float result = push.a * x[first + i] + push.b;
    y[first + i] = result;
  }
}
