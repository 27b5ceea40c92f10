// A small MLP as an IRON graph: weights bound by path, one image per input shape, a per-call row
// count patched in without recompiling, and the result checked against the graph's reference().
//
//   build/example_mlp
#include <cmath>
#include <cstdio>
#include <random>

#include "iron/iron.hpp"

namespace F = iron::functional;
using iron::Handle;

// Weights live in modules, addressed by dotted path like a torch state dict.
struct Mlp : iron::Module {
  iron::Param up = param("up", {256, 64});  // (out, in), as torch.nn.Linear stores it
  iron::Param down = param("down", {64, 256});
  Handle operator()(const Handle& x) const { return F::linear(F::silu(F::linear(x, up)), down); }
};

struct Block : iron::Graph {
  iron::Input x = input("x");                   // (rows, 64)
  iron::Scratchpad rows = scratchpad("rows");   // how many rows are valid this call
  iron::Param norm = param("norm", {64});
  Mlp mlp = child<Mlp>("mlp");
  Block() : Graph("block") {}
  iron::Outputs body() override { return {x + mlp(F::rms_norm(x[iron::upto(rows)], 64, norm, 1e-5))}; }
};

static iron::Tensor random(const iron::Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> v(size_t(iron::element_count(shape)));
  for (auto& e : v) e = normal(rng);
  return iron::Tensor::from(v, shape);
}

int main() {
  Block block;
  // A checkpoint is a tree of named tensors; here we make one by hand.
  block.load_state_dict({{"norm", random({64}, 1)}, {"mlp.up", random({256, 64}, 2)}, {"mlp.down", random({64, 256}, 3)}});
  iron::CompiledGraph& image = block.compile({{"x", {32, 64}}});  // one image for this shape
  std::printf("compiled %s\n", image.report().c_str());

  iron::Tensor x = random({32, 64}, 4);
  for (int rows : {32, 17, 1}) {
    const auto& result = image({x}, {{"rows", rows}});  // `rows` rows this call, no recompiling
    iron::Tensor y = result.outputs[0];
    std::vector<iron::Tensor> want = block.reference({x}, {{"rows", rows}});
    auto got = y.to_floats(), ref = want[0].to_floats();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::fmax(worst, std::fabs(double(got[i]) - ref[i]));
    std::printf("rows=%2d: output %s, max |image - reference| = %.2e\n", rows, iron::to_string(y.shape()).c_str(), worst);
    if (worst > 1e-4) return 1;
  }
  return 0;
}
