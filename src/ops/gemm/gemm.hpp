#pragma once
#include <vector>
#include "ops/op.hpp"
namespace iron::ops {
/// GEMM, ProjectionGEMM (a GEMM with an epilogue) and GEMV.
std::vector<OpEntry> matmul_entries();
}  // namespace iron::ops
