// Helpers the graph tests share: deterministic data, comparisons, and catching IRON errors.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "iron/iron.hpp"

namespace iron::testing {

inline Tensor random_tensor(const Shape& shape, DType dtype = f32, uint32_t seed = 1, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(size_t(element_count(shape)));
  for (auto& x : v) x = u(rng);
  return Tensor::from(v, shape, dtype);
}

inline void expect_close(const Tensor& got, const Tensor& want, double atol = 1e-5, double rtol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  auto g = got.to_floats(), w = want.to_floats();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(double(g[i]) - double(w[i])), atol + rtol * std::abs(double(w[i])))
        << "element " << i << ": " << g[i] << " vs " << w[i];
}

/// A rows x cols f32 tensor of repeating values k / `divisor` (k in -14 .. 14), the same for the same
/// seed: data whose sums a test can follow, cheaper than random_tensor's.
inline Tensor pattern_tensor(int64_t rows, int64_t cols, int seed, float divisor) {
  std::vector<float> v(size_t(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 37 + size_t(seed) * 11) % 29) - 14) / divisor;
  return Tensor::from(v, {rows, cols});
}

/// Runs `fn`, expecting an iron::Error of `kind` whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error was raised";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

}  // namespace iron::testing
