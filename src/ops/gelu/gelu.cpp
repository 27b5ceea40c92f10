// GELU: exact (x * Phi(x), with erf) by default as torch's, or its tanh approximation.
#include "ops/gelu/gelu.hpp"

#include <algorithm>
#include <cmath>

#include "ops/op.hpp"
#include "ops/unary.hpp"

namespace iron::ops {

// Fitted by least squares on 200 Chebyshev nodes of each interval, in double, then rounded to f32
// (checked against erf in double at 2 million points of [-6, 6]: within 7e-8). Each row padded
// to 16 floats, so a vector of up to 16 lanes loads it whole.
const float kErfPoly[kErfDegree + 1][16] = {
    {2.763263881e-01f, 7.111556530e-01f, 9.229001403e-01f, 9.866716862e-01f, 9.985373020e-01f, 9.998993874e-01f, 9.999957085e-01f, 9.999998808e-01f, 0, 0, 0, 0, 0, 0, 0, 0},
    {1.060014129e+00f, 6.429310441e-01f, 2.365211248e-01f, 5.277499557e-02f, 7.142318878e-03f, 5.862772232e-04f, 2.918902464e-05f, 8.814321859e-07f, 0, 0, 0, 0, 0, 0, 0, 0},
    {-2.650035322e-01f, -4.821982980e-01f, -2.956514060e-01f, -9.235624224e-02f, -1.607021689e-02f, -1.612262568e-03f, -9.486432828e-05f, -3.305366818e-06f, 0, 0, 0, 0, 0, 0, 0, 0},
    {-3.091707826e-01f, 2.678879164e-02f, 1.675357968e-01f, 9.015728533e-02f, 2.172455378e-02f, 2.760388656e-03f, 1.958097273e-04f, 7.969613762e-06f, 0, 0, 0, 0, 0, 0, 0, 0},
    {1.269805133e-01f, 1.506870091e-01f, -6.159254350e-03f, -4.810229316e-02f, -1.908338629e-02f, -3.258103272e-03f, -2.865697315e-04f, -1.384173811e-05f, 0, 0, 0, 0, 0, 0, 0, 0},
    {8.005305380e-02f, -5.324254930e-02f, -4.718112946e-02f, 6.624359172e-03f, 1.065769792e-02f, 2.755803987e-03f, 3.137963649e-04f, 1.837120726e-05f, 0, 0, 0, 0, 0, 0, 0, 0},
    {-4.051715881e-02f, -2.687397785e-02f, 2.129455470e-02f, 8.966748603e-03f, -2.904232824e-03f, -1.657795976e-03f, -2.635108540e-04f, -1.925039578e-05f, 0, 0, 0, 0, 0, 0, 0, 0},
    {-1.616146974e-02f, 1.842865162e-02f, 3.629375016e-03f, -6.058665458e-03f, -6.711534224e-04f, 6.462067249e-04f, 1.700228895e-04f, 1.626688390e-05f, 0, 0, 0, 0, 0, 0, 0, 0},
    {9.410910308e-03f, 2.329175593e-03f, -5.574545823e-03f, 6.619718042e-04f, 9.973413544e-04f, -8.043663547e-05f, -8.198063733e-05f, -1.153620451e-05f, 0, 0, 0, 0, 0, 0, 0, 0},
    {2.546478296e-03f, -3.862441052e-03f, 8.230078383e-04f, 8.929151809e-04f, -3.582120989e-04f, -7.389365055e-05f, 2.541239701e-05f, 6.242501968e-06f, 0, 0, 0, 0, 0, 0, 0, 0},
};

float erf_f32(float x) {
  const float ax = std::fabs(x);
  if (!(ax < 4.0f)) return std::isnan(x) ? x : std::copysign(1.0f, x);
  const int i = std::min(int(ax + ax), 7);
  const float u = ax - std::fma(float(i), 0.5f, 0.25f);
  float r = kErfPoly[kErfDegree][i];
  for (int d = kErfDegree - 1; d >= 0; --d) r = std::fma(r, u, kErfPoly[d][i]);
  return std::copysign(r, x);
}

double gelu_double(double v, bool tanh) {
  if (tanh) return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  return 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
}

void gelu_rows(float* v, int64_t n, bool tanh, const cpu::Features& f) {
  if (gelu_rows_vector(v, n, tanh, f)) return;
  for (int64_t k = 0; k < n; ++k) v[k] = float(gelu_double(v[k], tanh));
}

namespace {
const Declaration kGELU{"GELU", nullptr, {{"elements", int64_t(0)}, {"approximate", std::string("none")}}, {}};

struct GELU : UnaryOp {
  GELU(Fields p, Fields t) : UnaryOp(kGELU, std::move(p), std::move(t)) {
    const std::string& a = params_.text("approximate");
    if (a != "none" && a != "tanh") value_error("GELU approximate is 'none' or 'tanh', not '" + a + "'");
    tanh_ = a == "tanh";
  }
  // The reference: the formula in double.
  float apply(float x) const override { return float(gelu_double(x, tanh_)); }
  void apply_row(float* v, int64_t n, const cpu::Features& f) const override { gelu_rows(v, n, tanh_, f); }
  Tolerance tolerance(Precision) const override { return {1e-6, 4e-6}; }
  bool tanh_ = false;
};
}  // namespace

OpEntry gelu_entry() { return entry<GELU>(kGELU, highway_targets(), IRON_VULKAN_RECORDER(record_unary)); }

}  // namespace iron::ops
