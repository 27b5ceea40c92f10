// GELU: exact (x * Phi(x), with erf) by default as torch's, or its tanh approximation.
#include "ops/op.hpp"
#include "ops/unary.hpp"

namespace iron::ops {

void gelu_tanh_avx512(float* v, int64_t n);  // gelu_avx512.cpp

namespace {
const Declaration kGELU{"GELU", nullptr, {{"elements", int64_t(0)}, {"approximate", std::string("none")}}, {}};

struct GELU : UnaryOp {
  GELU(Fields p, Fields t) : UnaryOp(kGELU, std::move(p), std::move(t)) {
    const std::string& a = params_.text("approximate");
    if (a != "none" && a != "tanh") value_error("GELU approximate is 'none' or 'tanh', not '" + a + "'");
    tanh_ = a == "tanh";
  }
  float apply(float x) const override {
    double v = x;
    if (tanh_) return float(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    return float(0.5 * v * (1.0 + std::erf(v * 0.7071067811865476)));
  }
  // The tanh form as x / (1 + e^(-2u)) in f32: AVX-512 with a vector e^x, else std::exp per
  // value (the double tanh of apply() is the reference's).
  void apply_row(float* v, int64_t n, const cpu::Features& f) const override {
    if (!tanh_) return UnaryOp::apply_row(v, n, f);
    if (f.avx512f) return gelu_tanh_avx512(v, n);
    for (int64_t k = 0; k < n; ++k) {
      const float x = v[k];
      v[k] = x / (1.0f + std::exp(-2.0f * 0.7978845608f * (x + 0.044715f * x * x * x)));
    }
  }
  Tolerance tolerance(Precision) const override { return {1e-6, 4e-6}; }
  bool tanh_ = false;
};
}  // namespace

CatalogEntry gelu_entry() { return entry<GELU>(kGELU); }

}  // namespace iron::ops
