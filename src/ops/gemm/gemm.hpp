#pragma once
#include <vector>
#include "iron/operator.hpp"
namespace iron::ops {
/// GEMM, ProjectionGEMM (a GEMM with an epilogue) and GEMV.
std::vector<CatalogEntry> matmul_entries();
}  // namespace iron::ops
