// LayerNorm: each row of x minus its mean, over its standard deviation (epsilon under the root),
// times a weight row when `weighted` (a bias is a separate Add). Rows may be bounded per call.
#include "ops/op.hpp"
#include "ops/rowwise.hpp"

namespace iron::ops {

// In vector lanes where `f` runs a Highway copy (layer_norm_hwy.cpp); false: not here.
bool layer_norm_row_vector(const float* x, const float* weight, float* y, int64_t n, double epsilon,
                           const cpu::Features& f);

namespace {
const Declaration kLayerNorm{"LayerNorm", nullptr, {{"N", std::nullopt}, {"epsilon", 1e-5}, {"weighted", true}}, {}};

// In vector lanes, the same sums in double, where a Highway copy runs (layer_norm_hwy.cpp).
struct LayerNorm : RowwiseOp {
  LayerNorm(Fields p, Fields t) : RowwiseOp(kLayerNorm, std::move(p), std::move(t), &layer_norm_row_vector) {}
  void row(const float* x, const float* weight, float* y, int64_t n) const override {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[i];
    mean /= double(n);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    double scale = 1.0 / std::sqrt(var / double(n) + epsilon());
    for (int64_t i = 0; i < n; ++i) y[i] = float((x[i] - mean) * scale * (weight ? double(weight[i]) : 1.0));
  }
  Tolerance tolerance(Precision) const override { return {1e-5, 1e-5}; }
};
}  // namespace

OpEntry layer_norm_entry() {
  return entry<LayerNorm>(kLayerNorm, highway_targets(),
                          IRON_VULKAN_RECORDER(record_rowwise));
}

}  // namespace iron::ops
