// Check mode allows one rounding of a narrow output dtype on top of an operator's tolerance: the
// kernel rounds its f32 result to bf16 and the reference its f64 result, and the two may land on
// neighbouring bf16 values.
#include <gtest/gtest.h>

#include <random>

#include "iron/iron.hpp"

namespace F = iron::functional;
using namespace iron;

namespace {

struct WideLinear : Graph {
  Input x = input("x");
  Param w = param("w", {256, 512});
  Outputs body() override { return {F::linear(x, w)}; }
};

TEST(CheckMode, Bf16OutputsMayRoundToANeighbour) {
  WideLinear g;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w(256 * 512), x(32 * 512);
  for (float& v : w) v = u(rng);
  for (float& v : x) v = u(rng);
  g.load_state_dict(
      std::vector<std::pair<std::string, Tensor>>{{"w", Tensor::from(w, {256, 512})}});
  // 8192 bf16 outputs: without the allowance some output lands one bf16 step from its reference.
  auto& image = g.compile({{"x", InputSpec({32, 512}, bf16)}}, {.check = true});
  EXPECT_NO_THROW(image({Tensor::from(x, {32, 512}, bf16)}));
}

}  // namespace
