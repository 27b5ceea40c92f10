#version 450
#extension GL_GOOGLE_include_directive : require
// GEMM, ProjectionGEMM and GEMV for a device without subgroup arithmetic: 64 lanes, their sums
// added through a tree in shared memory (matmul.glsl).
layout(local_size_x = 64) in;

#define LANE gl_LocalInvocationID.x
#define LANES 64u

shared float partial[64];

// The sum of `v` over the workgroup, in every lane (every lane calls it: control is uniform).
float lane_sum(float v) {
  const uint t = gl_LocalInvocationID.x;
  partial[t] = v;
  barrier();
  for (uint half_size = 32u; half_size > 0u; half_size >>= 1) {
    if (t < half_size) partial[t] += partial[t + half_size];
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

#include "ops/gemm/matmul.glsl"
