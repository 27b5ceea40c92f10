#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_ballot : require
// GEMM, ProjectionGEMM and GEMV with a workgroup of one subgroup, whose lanes' sums subgroupAdd
// adds and (lanes over columns) whose lanes share a's elements by subgroupBroadcast: no shared
// memory, no barrier (matmul.glsl).
layout(local_size_x_id = 5) in;  // the subgroup size

#define LANE gl_SubgroupInvocationID
#define LANES gl_SubgroupSize
float lane_sum(float v) { return subgroupAdd(v); }
#define LANE_BROADCAST(v, lane) subgroupBroadcast(v, lane)

#include "ops/gemm/matmul.glsl"
