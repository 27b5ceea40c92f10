// GELU's row function on every path this processor has (portable, AVX2, AVX-512) against the
// formula in double, over the whole range and the tails, and the f32 erf its vector paths use.
#include "ops/feature_sets.hpp"
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "ops/gelu/gelu.hpp"

namespace iron {
namespace {

using test::feature_sets;

double gelu(double x, bool tanh) {
  if (tanh) return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
}

TEST(Gelu, EveryPathWithinTheOperatorsToleranceOverTheRangeAndTails) {
  // [-12, 12] in steps of 1/4096, then tails, zeros, tiny values and the largest floats; an odd
  // count, so the vector paths' masked ends run too.
  std::vector<float> x;
  for (int i = -12 * 4096; i <= 12 * 4096; ++i) x.push_back(float(i) / 4096);
  for (float v : {40.0f, -40.0f, 1e4f, -1e4f, 0.0f, -0.0f, 1e-30f, -1e-30f, 1e-41f, -1e-41f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})
    x.push_back(v);
  ASSERT_EQ(x.size() % 2, 1u);
  for (const cpu::Features& f : feature_sets())
    for (bool tanh : {false, true}) {
      SCOPED_TRACE(f.str() + (tanh ? " tanh" : " erf"));
      std::vector<float> y = x;
      ops::gelu_rows(y.data(), int64_t(y.size()), tanh, f);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = gelu(x[i], tanh);
        // The GELU operator's tolerance (atol 1e-6, rtol 4e-6) in f32.
        ASSERT_LE(std::abs(double(y[i]) - want), 1e-6 + 4e-6 * std::abs(want))
            << "gelu(" << x[i] << ") = " << y[i] << ", not " << want;
      }
    }
}

TEST(Gelu, ErfInF32WithinAnUlpOfAHalf) {
  for (int i = -6 * 65536; i <= 6 * 65536; ++i) {
    const float x = float(i) / 65536;
    ASSERT_LE(std::abs(double(ops::erf_f32(x)) - std::erf(double(x))), 7.5e-8) << "erf(" << x << ")";
  }
  EXPECT_EQ(ops::erf_f32(100.0f), 1.0f);
  EXPECT_EQ(ops::erf_f32(-100.0f), -1.0f);
  EXPECT_TRUE(std::isnan(ops::erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace iron
