// RMSNorm: each row of x over the root mean square of its entries (epsilon under the root),
// times a weight row when `weighted`. Rows may be bounded per call.
#include "ops/op.hpp"
#include "ops/rowwise.hpp"

namespace iron::ops {

namespace {
const Declaration kRMSNorm{"RMSNorm", nullptr, {{"N", std::nullopt}, {"epsilon", 1e-6}, {"weighted", true}}, {}};

struct RMSNorm : RowwiseOp {
  RMSNorm(Fields p, Fields t) : RowwiseOp(kRMSNorm, std::move(p), std::move(t)) {}
  void row(const float* x, const float* weight, float* y, int64_t n) const override {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    double scale = 1.0 / std::sqrt(ss / double(n) + epsilon());
    for (int64_t i = 0; i < n; ++i) y[i] = float(double(x[i]) * scale * (weight ? double(weight[i]) : 1.0));
  }
  Tolerance tolerance(Precision) const override { return {1e-6, 1e-5}; }
};
}  // namespace

CatalogEntry rms_norm_entry() { return entry<RMSNorm>(kRMSNorm); }

}  // namespace iron::ops
