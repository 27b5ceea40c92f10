// The RMSNorm of one row, shared by the RMSNorm operator and the matmuls an RMSNorm is folded
// into (graph/fold.cpp), so that folding changes no bit of the result.
#pragma once

#include <cstdint>

#include "devices/cpu/kernel.hpp"

namespace iron::ops {

/// y = x / sqrt(mean(x^2) + eps) (times weight when given), over n entries: sums in double,
/// each output rounded once to f32.
void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, double eps);
/// The same as the CPU kernel computes it on a processor with `f`: in vector lanes where a
/// Highway copy runs (rms_norm_hwy.cpp: the same eight sums, in the same order), else the row
/// above. The RMSNorm kernel and a matmul it is folded into both call this, so folding changes
/// no bit.
void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, double eps, const cpu::Features& f);

}  // namespace iron::ops
