// A one-token decoder step as an IRON graph: the token and its position are carried values, the
// KV cache is a state, and the next token is sampled on the device, so a CarriedLoop runs the
// steps back to back while the host only reads each token as it lands. The tokens are checked
// against the same steps run through the graph's reference(), step by step on the host.
//
//   build/example_decoder_step
#include <cstdio>
#include <random>

#include "iron/iron.hpp"

namespace F = iron::functional;
using iron::Affine;
using iron::Handle;

constexpr int64_t kVocab = 64, kDim = 32, kHeads = 4, kHeadDim = 8, kContext = 64;

struct Decoder : iron::Graph {
  iron::Carried token = carried("token");
  iron::Carried position = carried("position");
  iron::Param embed = param("embed", {kVocab, kDim});
  iron::Param qkv = param("qkv", {3 * kDim, kDim});
  iron::Param out = param("out", {kDim, kDim});
  iron::Param norm = param("norm", {kDim});
  iron::State keys = state("keys", {kContext, kHeads, kHeadDim});
  iron::State values = state("values", {kContext, kHeads, kHeadDim});
  iron::State tokens = state("tokens", {kContext + 1}, iron::i32);
  Decoder() : Graph("decoder") {}

  iron::Outputs body() override {
    Handle x = F::copy(Handle(embed)[{iron::at(token)}]).reshape({1, kDim});
    Handle h = F::linear(F::rms_norm(x, kDim, norm, 1e-5), qkv);  // (1, 3 * dim): q, k, v
    Handle q = F::copy(h[{0, iron::range(0, kDim)}]).reshape({1, kHeads, kHeadDim});
    Handle(keys)[iron::window(position, 1)].assign(F::copy(h[{0, iron::range(kDim, 2 * kDim)}]).reshape({1, kHeads, kHeadDim}));
    Handle(values)[iron::window(position, 1)].assign(F::copy(h[{0, iron::range(2 * kDim, 3 * kDim)}]).reshape({1, kHeads, kHeadDim}));
    Handle attended = F::attention(q, keys, values, position).reshape({1, kDim});
    x = x + F::linear(attended, out);
    Handle logits = F::linear(F::rms_norm(x, kDim, norm, 1e-5), embed);  // tied classifier
    Handle next = F::argmax(logits);
    Handle(tokens)[iron::window(Affine(position) + 1, 1)].assign(next);
    return iron::Outputs({logits}, iron::carry({{"token", next}, {"position", Affine(position) + 1}}));
  }
};

static iron::Tensor random(const iron::Shape& shape, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(size_t(iron::element_count(shape)));
  for (auto& e : v) e = normal(rng);
  return iron::Tensor::from(v, shape);
}

int main() {
  Decoder decoder;
  decoder.load_state_dict({{"embed", random({kVocab, kDim}, 1, 1.0f)},
                           {"qkv", random({3 * kDim, kDim}, 2, 0.3f)},
                           {"out", random({kDim, kDim}, 3, 0.3f)},
                           {"norm", random({kDim}, 4, 1.0f)}});
  // The step takes no tensor: one version serves as the loop's first run and its body.
  iron::CompiledGraph& step = decoder.compile({});
  iron::CarriedLoop loop(step, step, /*depth=*/2);
  const int steps = 20;
  iron::Tensor produced = step.read(decoder.tokens);
  std::vector<int32_t> device;
  for (int64_t k : loop.run(steps, {}, {{"token", 7}, {"position", 0}}))
    device.push_back(produced.data_as<int32_t>()[k + 2]);  // run 0 was `first`; step k wrote k + 2

  // The same steps through reference(), stepped by hand: each call returns the carried values
  // (the sampled token, the next position) that the next call is given.
  std::vector<int32_t> host;
  int64_t token = 7, position = 0;
  for (int64_t p = 0; p <= steps; ++p) {
    iron::RunResult r = decoder.reference({}, {{"token", token}, {"position", position}});
    token = r.carried_value("token");
    position = r.carried_value("position");
    if (p > 0) host.push_back(int32_t(token));
  }
  std::printf("device:   ");
  for (int32_t t : device) std::printf("%d ", t);
  std::printf("\nreference:");
  for (int32_t t : host) std::printf(" %d", t);
  std::printf("\n%s\n", device == host ? "identical" : "DIFFERENT");
  return device == host ? 0 : 1;
}
