// LayerNorm's row in vector lanes, written once with Highway (devices/cpu/highway.hpp) for every
// target it has here: the mean and the variance summed in double (two sums each, as many lanes
// as a vector of doubles holds), then (x - mean) * scale * weight in double and rounded once, as
// the scalar row does; only the order of the sums differs from it. A BERT encoder normalises
// every row twice a layer: the scalar loop was 8% of all-MiniLM-L6-v2's time.
#include <cmath>
#include <cstddef>
#include <cstdint>

#define HWY_TARGET_INCLUDE "ops/layer_norm/layer_norm_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "devices/cpu/hwy_lanes-inl.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::layer_norm_hwy)

using DD = hn::ScalableTag<double>;
using DF = hn::Rebind<float, DD>;  // as many floats as DD has doubles

// sum over i of f(x[i] as double), in two vector sums and a scalar tail.
template <class F>
double sum_of(const float* x, int64_t n, F f) {
  const DD dd;
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(dd));
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    s0 = hn::Add(s0, f(dd, hn::PromoteTo(dd, hn::LoadU(df, x + i))));
    s1 = hn::Add(s1, f(dd, hn::PromoteTo(dd, hn::LoadU(df, x + i + lanes))));
  }
  for (; i + lanes <= n; i += lanes) s0 = hn::Add(s0, f(dd, hn::PromoteTo(dd, hn::LoadU(df, x + i))));
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += hn::GetLane(f(dd, hn::Set(dd, double(x[i]))));
  return sum;
}

void row(const float* x, const float* weight, float* y, int64_t n, double epsilon) {
  const DD dd;
  const double mean = sum_of(x, n, [](DD, hn::Vec<DD> v) { return v; }) / double(n);
  const auto m = hn::Set(dd, mean);
  const double var = sum_of(x, n, [&](DD, hn::Vec<DD> v) {
    const auto d = hn::Sub(v, m);
    return hn::Mul(d, d);
  });
  const double scale = 1.0 / std::sqrt(var / double(n) + epsilon);
  cpu::lanes::HWY_NAMESPACE::NormalisedRow<true>(x, weight, y, n, mean, scale);
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops {

bool layer_norm_row_vector(const float* x, const float* weight, float* y, int64_t n, double epsilon,
                           const cpu::Features& f) {
  return cpu::run_picked(IRON_HWY_PICK(f, layer_norm_hwy, row), x, weight, y, n, epsilon);
}

}  // namespace iron::ops
#endif
