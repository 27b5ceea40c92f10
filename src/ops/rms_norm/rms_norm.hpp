// The RMSNorm of one row, shared by the RMSNorm operator and the matmuls an RMSNorm is folded
// into (graph/fold.cpp), so that folding changes no bit of the result.
#pragma once

#include <cstdint>

namespace iron::ops {

/// y = x / sqrt(mean(x^2) + eps) (times weight when given), over n entries: sums in double,
/// each output rounded once to f32.
void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, double eps);

}  // namespace iron::ops
