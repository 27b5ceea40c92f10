#include <gtest/gtest.h>

#include "iron/iron.hpp"

namespace F = iron::functional;
using namespace iron;

namespace {

struct Mlp : Module {
  Param up = param("up", {8, 4});
  Param down = param("down", {4, 8});
  Handle operator()(const Handle& x) const { return F::linear(F::silu(F::linear(x, up)), down); }
};

struct ResidualMlp : Graph {
  Input x = input("x");
  Scratchpad rows = scratchpad("rows");
  Mlp mlp = child<Mlp>("mlp");
  Outputs body() override { return {x + mlp(x[upto(rows)])}; }
};

std::vector<std::pair<std::string, Tensor>> weights() {
  std::vector<float> up(32), down(32);
  for (int i = 0; i < 32; ++i) up[size_t(i)] = 0.1f * float(i % 7) - 0.3f, down[size_t(i)] = 0.05f * float(i % 5) - 0.1f;
  return {{"mlp.up", Tensor::from(up, {8, 4})}, {"mlp.down", Tensor::from(down, {4, 8})}};
}

TEST(Smoke, MlpMatchesReference) {
  ResidualMlp block;
  block.load_state_dict(weights());
  auto& image = block.compile({{"x", {6, 4}}});
  std::vector<float> xs(24);
  for (int i = 0; i < 24; ++i) xs[size_t(i)] = 0.25f * float(i % 9) - 1.0f;
  Tensor x = Tensor::from(xs, {6, 4});
  const auto& out = image({x}, {{"rows", 3}});
  auto ref = block.reference({x}, {{"rows", 3}});
  ASSERT_EQ(out.outputs.size(), 1u);
  EXPECT_EQ(out.outputs[0].shape(), (Shape{3, 4}));
  auto got = out.outputs[0].to_floats();
  auto want = ref[0].to_floats();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

}  // namespace
