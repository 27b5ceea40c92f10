#version 450
// Busy work: each invocation takes `iterations` steps of a linear congruential generator from
// its word of `results` and stores the end back, so the loop cannot be optimised away. The
// runtime's tests use it to make a submission outlast a short wait (the timeout path); the
// length comes from the number of workgroups, not from one long loop, because lavapipe
// (llvmpipe) ends a loop nest after 65535 iterations in all, a guard against shaders that never
// end.
//   binding 0: one uint per invocation, read and written
//   push constants: iterations (at most 65535 for lavapipe)

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) buffer Results { uint results[]; };

layout(push_constant) uniform Push {
  uint iterations;
} push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  uint state = results[i];
  for (uint step = 0; step < push.iterations; ++step) state = state * 1664525u + 1013904223u;
  results[i] = state;
}
