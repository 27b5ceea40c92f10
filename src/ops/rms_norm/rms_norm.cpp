// RMSNorm: each row of x over the root mean square of its entries (epsilon under the root),
// times a weight row when `weighted`. Rows may be bounded per call.
#include "ops/rms_norm/rms_norm.hpp"

#include "ops/op.hpp"
#include "ops/rowwise.hpp"

namespace iron::ops {

void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, double eps) {
  // Eight running sums in double: the additions overlap instead of waiting on one another (a
  // decode step's norm is on the critical path, each thread of the matmuls it is folded into
  // computing it for itself).
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += double(x[i + j]) * double(x[i + j]);
  for (; i < n; ++i) part[0] += double(x[i]) * double(x[i]);
  const double ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
  for (i = 0; i < n; ++i) y[i] = float(double(x[i]) * scale * (weight ? double(weight[i]) : 1.0));
}

bool rms_norm_row_vector(const float* x, const float* weight, float* y, int64_t n, double eps,
                         const cpu::Features& f);

void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, double eps, const cpu::Features& f) {
  if (!rms_norm_row_vector(x, weight, y, n, eps, f)) rms_norm_row(x, weight, y, n, eps);
}

namespace {
const Declaration kRMSNorm{"RMSNorm", nullptr, {{"N", std::nullopt}, {"epsilon", 1e-6}, {"weighted", true}}, {}};

// In vector lanes where a Highway copy runs (rms_norm_hwy.cpp).
struct RMSNorm : RowwiseOp {
  RMSNorm(Fields p, Fields t) : RowwiseOp(kRMSNorm, std::move(p), std::move(t), &rms_norm_row_vector) {}
  void row(const float* x, const float* weight, float* y, int64_t n) const override {
    rms_norm_row(x, weight, y, n, epsilon());
  }
  Tolerance tolerance(Precision) const override { return {1e-6, 1e-5}; }
};
}  // namespace

OpEntry rms_norm_entry() {
  return entry<RMSNorm>(kRMSNorm, highway_targets(),
                        IRON_VULKAN_RECORDER(record_rowwise));
}

}  // namespace iron::ops
