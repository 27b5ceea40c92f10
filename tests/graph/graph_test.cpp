// The graph layer: versions per shape, the shared arena, weight uploads, per-call values, bounds,
// views and gathers, reference() against the compiled output, and check mode.
#include <gtest/gtest.h>

#include "graph/arena.hpp"
#include "graph/image.hpp"
#include "graph/recording.hpp"
#include "iron/iron.hpp"
#include "ops/op.hpp"
#include "test_kernels.hpp"
#include "test_util.hpp"

namespace F = iron::functional;
using namespace iron;
using iron::testing::expect_close;
using iron::testing::expect_error;
using iron::testing::random_tensor;

namespace {

struct Linear : Graph {
  Input x = input("x");
  Scratchpad rows = scratchpad("rows");
  Param w = param("w", {5, 7});
  Param b = param("b", {5});
  Linear() : Graph("linear") {}
  Outputs body() override { return {F::linear(x[upto(rows)], w, b)}; }
};

std::vector<std::pair<std::string, Tensor>> linear_weights() {
  return {{"w", random_tensor({5, 7}, f32, 2)}, {"b", random_tensor({5}, f32, 3)}};
}

TEST(Graph, VersionsShareOneArenaAndUploadEachWeightOnce) {
  Linear g;
  g.load_state_dict(linear_weights());
  std::vector<std::string> logged;
  set_log_level(LogLevel::info);
  set_log_sink([&](LogLevel, std::string_view m) { logged.emplace_back(m); });
  CompiledGraph& small = g.compile({{"x", {4, 7}}});
  CompiledGraph& large = g.compile({{"x", {9, 7}}});
  CompiledGraph& again = g.compile({{"x", {4, 7}}});
  set_log_sink(nullptr);
  set_log_level(LogLevel::warning);
  EXPECT_EQ(&small, &again);
  EXPECT_EQ(g.versions(), 2u);
  ASSERT_EQ(logged.size(), 2u);  // each new shape logs its compile
  EXPECT_NE(logged[1].find("(9, 7)"), std::string::npos);
  small({random_tensor({4, 7})}, {{"rows", 4}});
  large({random_tensor({9, 7})}, {{"rows", 9}});
  small({random_tensor({4, 7})}, {{"rows", 2}});
  // One arena: its scratch fits the larger version; each weight was uploaded once.
  EXPECT_EQ(g.arena().uploads(), 2);
  EXPECT_GE(g.arena().scratch_bytes(), large.image().scratch_bytes());
}

// Two children each holding a weight named `w`: the stats count each by the path the graph holds
// it at, once each (not `w` twice, which reads as one weight uploaded twice).
struct Scale : Module {
  Param w = param("w", {3});
};
struct TwoScales : Graph {
  Input x = input("x");
  Scale first = child<Scale>("first");
  Scale second = child<Scale>("second");
  TwoScales() : Graph("two_scales") {}
  Outputs body() override { return {x * first.w * second.w}; }
};

TEST(Graph, UploadsAreCountedByEachWeightsPath) {
  TwoScales g;
  g.load_state_dict({{"first.w", random_tensor({3}, f32, 4)}, {"second.w", random_tensor({3}, f32, 5)}});
  g.compile({{"x", {2, 3}}})({random_tensor({2, 3})});
  g.compile({{"x", {4, 3}}})({random_tensor({4, 3})});
  EXPECT_EQ(g.stats().uploads, (std::vector<std::pair<std::string, int64_t>>{{"first.w", 1}, {"second.w", 1}}))
      << g.stats().str();
}

// The spec: weights are uploaded at a version's first call, or by load(), not by compile().
TEST(Graph, WeightsAreUploadedAtTheFirstCallOrLoadNotAtCompile) {
  TwoScales g;
  g.load_state_dict({{"first.w", random_tensor({3}, f32, 4)}, {"second.w", random_tensor({3}, f32, 5)}});
  CompiledGraph& small = g.compile({{"x", {2, 3}}});
  EXPECT_TRUE(g.stats().uploads.empty()) << g.stats().str();
  small({random_tensor({2, 3})});
  const auto once = std::vector<std::pair<std::string, int64_t>>{{"first.w", 1}, {"second.w", 1}};
  EXPECT_EQ(g.stats().uploads, once) << g.stats().str();
  // After release() frees them, a new version's compile uploads nothing; its load() does.
  g.release();
  CompiledGraph& large = g.compile({{"x", {4, 3}}});
  EXPECT_EQ(g.stats().uploads, once) << g.stats().str();
  large.load();
  EXPECT_EQ(g.stats().uploads, (std::vector<std::pair<std::string, int64_t>>{{"first.w", 2}, {"second.w", 2}}))
      << g.stats().str();
}

TEST(Graph, PerCallValuesChangeResultsWithoutRecompiling) {
  Linear g;
  g.load_state_dict(linear_weights());
  Tensor x = random_tensor({6, 7}, f32, 9);
  CompiledGraph& v = g.compile({{"x", {6, 7}}});
  for (int rows : {1, 3, 6}) {
    Tensor got = v({x}, {{"rows", rows}}).outputs[0].clone();
    EXPECT_EQ(got.dim(0), rows);
    expect_close(got, g.reference({x}, {{"rows", rows}})[0]);
  }
  EXPECT_EQ(g.versions(), 1u);
}

TEST(Graph, CallingWithANewShapeCompilesThroughVersionFor) {
  Linear g;
  g.load_state_dict(linear_weights());
  Tensor x3 = random_tensor({3, 7}), x5 = random_tensor({5, 7});
  g.version_for(std::span<const Tensor>(&x3, 1))({x3}, {{"rows", 3}});
  g.version_for(std::span<const Tensor>(&x5, 1))({x5}, {{"rows", 5}});
  EXPECT_EQ(g.versions(), 2u);
}

TEST(Graph, BoundsOutsideAViewAreIndexErrors) {
  Linear g;
  g.load_state_dict(linear_weights());
  CompiledGraph& v = g.compile({{"x", {4, 7}}});
  expect_error([&] { v({random_tensor({4, 7})}, {{"rows", 5}}); }, ErrorKind::index,
               {"linear", "rows", "outside [0, 5)"});
  expect_error([&] { g.reference({random_tensor({4, 7})}, {{"rows", 5}}); }, ErrorKind::index, {"rows"});
}

// Views: a per-call row of a state written and read back, a strided (transposed) view copied,
// and rows gathered by per-call ids and by fixed ids.
struct Views : Graph {
  Input x = input("x");      // (4, 3)
  Input ids = input("ids");  // (2,) i32
  Scratchpad position = scratchpad("position");
  State cache = state("cache", {8, 3});
  Weight table = weight("table", Tensor::from({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3}));
  Views() : Graph("views") {}
  Outputs body() override {
    cache[at(position)].assign(x[1]);                // one row into the cache at `position`
    Handle row = F::copy(Handle(cache)[at(position)]);  // and back
    Handle transposed = F::copy(Handle(x).T());         // (3, 4), from a strided view
    Handle gathered = F::copy(table[ids]);              // rows by per-call ids
    Handle fixed = F::copy(Handle(table).rows({3, 0}));  // rows by fixed ids
    return {row, transposed, gathered, fixed};
  }
};

TEST(Graph, ViewsAndGathersMatchTheReference) {
  Views g;
  Tensor x = Tensor::from({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3});
  Tensor ids = Tensor::from_ints({2, 1}, {2});
  CompiledGraph& v = g.compile({{"x", {4, 3}}, {"ids", InputSpec({2}, i32)}});
  const auto& out = v({x, ids}, {{"position", 5}});
  EXPECT_EQ(out.outputs[0].to_floats(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(out.outputs[1].to_floats(), (std::vector<float>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12}));
  EXPECT_EQ(out.outputs[2].to_floats(), (std::vector<float>{20, 21, 22, 10, 11, 12}));
  EXPECT_EQ(out.outputs[3].to_floats(), (std::vector<float>{30, 31, 32, 0, 1, 2}));
  auto ref = g.reference({x, ids}, {{"position", 5}});
  for (size_t i = 0; i < 4; ++i) expect_close(out.outputs[i], ref[i]);
  // The state kept the row at position 5 and nothing else.
  auto cache = v.read(g.cache).to_floats();
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(cache[size_t(r * 3 + c)], r == 5 ? float(4 + c) : 0.0f);
  expect_error([&] { v({x, ids}, {{"position", 8}}); }, ErrorKind::index, {"position", "outside [0, 8)"});
}


// A walk's per-call `length` bounds its view's second axis: a shorter call after a longer one
// leaves the entries past it as they were on the device and zero in the reference, so both say
// what is valid, and agree on every valid entry.
TEST(Graph, ResultsSayWhatIsValidPastAWalksLength) {
  struct Walk : Graph {
    Input x = input("x");
    Scratchpad n = scratchpad("n");
    Walk() : Graph("walk") {}
    Outputs body() override {
      return {F::copy(x.handle().at(AccessPattern{0, {4, 8}, {8, 1}}, {4, 8}, {{0, Affine(4)}}, {}, Affine(n)))};
    }
  };
  Walk g;
  std::vector<float> xs(32);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i + 1);
  Tensor x = Tensor::from(xs, {4, 8});
  CompiledGraph& v = g.compile({{"x", {4, 8}}});
  EXPECT_EQ(v({x}, {{"n", 3}}).valid, (std::vector<Shape>{{4, 3}}));
  const RunResult& out = v({x}, {{"n", 1}});
  const RunResult ref = g.reference({x}, {{"n", 1}});
  ASSERT_EQ(out.valid, (std::vector<Shape>{{4, 1}}));
  EXPECT_EQ(ref.valid, out.valid);
  const auto got = out.outputs[0].to_floats(), want = ref.outputs[0].to_floats();
  for (size_t r = 0; r < 4; ++r) EXPECT_EQ(got[r * 8], want[r * 8]) << "row " << r;
}
TEST(Graph, StatesAreSharedByEveryVersion) {
  Views g;
  Tensor ids = Tensor::from_ints({0, 0}, {2});
  CompiledGraph& a = g.compile({{"x", {4, 3}}, {"ids", InputSpec({2}, i32)}});
  a({Tensor::from({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}), ids}, {{"position", 2}});
  CompiledGraph& b = g.compile({{"x", {4, 3}}, {"ids", InputSpec({2}, i32)}}, {.check = true});
  EXPECT_NE(&a, &b);
  EXPECT_EQ(b.read(g.cache).to_floats()[6], 4.0f);  // written by version a
}

TEST(Graph, ReferenceNeedsNoCompileAndMatchesCheckMode) {
  struct Net : Graph {
    Input x = input("x");
    Param g1 = param("g1", {16});
    Param w = param("w", {24, 16});
    Net() : Graph("net") {}
    Outputs body() override {
      Handle h = F::rms_norm(x, 16, g1, 1e-5);
      h = F::gelu(F::linear(h, w, {}, Precision::high), "tanh");
      return {F::softmax(h, 0.5), F::layer_norm(h, 24)};
    }
  } net;
  net.load_state_dict({{"g1", random_tensor({16}, f32, 4)}, {"w", random_tensor({24, 16}, f32, 5)}});
  Tensor x = random_tensor({5, 16}, f32, 6);
  auto ref = net.reference({x});
  const auto& out = net.compile({{"x", {5, 16}}}, {.check = true})({x});
  expect_close(out.outputs[0], ref[0], 1e-5, 1e-4);
  expect_close(out.outputs[1], ref[1], 1e-4, 1e-4);
}

// An operator whose kernel is off by one: check mode must catch it at that step.
const Declaration kOffByOne{"OffByOne", nullptr, {}, {}};
struct OffByOne : Operator {
  OffByOne() : Operator(kOffByOne, {}, {}) { test::add_test_kernel<OffByOne>(kOffByOne); }
  void reference(const RefCall& c) const override {
    for (int64_t i = 0; i < element_count(c.out[0].shape); ++i) c.out[0].data[i] = c.in[0].data[i];
  }
  struct Kernel : cpu::Kernel {
    cpu::Operand x, y;
    void run(const int64_t* w, int thread, int) const override {
      if (thread) return;
      for (int64_t i = 0; i < element_count(x.shape); ++i) y.data<float>(w)[i] = x.data<float>(w)[i] + (i == 2 ? 1.0f : 0.0f);
    }
  };
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    auto k = std::make_unique<Kernel>();
    k->x = a.in[0];
    k->y = a.out[0];
    return k;
  }
};

TEST(Graph, CheckModeCatchesAStepOutsideItsTolerance) {
  struct Faulty : Graph {
    Input x = input("x");
    Faulty() : Graph("faulty") {}
    Outputs body() override {
      Handle y = F::silu(x);
      Recorder& r = Recorder::require("test");
      Handle z = r.scratch("z", y.shape(), f32);
      r.add_step({std::make_shared<OffByOne>(), {y}, {z}, {}, Precision::highest});
      return {F::silu(z)};
    }
  } g;
  Tensor x = random_tensor({4});
  g.compile({{"x", {4}}})({x});  // without check the fault goes unseen
  expect_error([&] { g.compile({{"x", {4}}}, {.check = true})({x}); }, ErrorKind::value,
               {"check failed at step 1", "OffByOne", "element 2"});
}

TEST(Graph, TiedParamsBindOnceAndCastLikeCopy) {
  struct Tied : Graph {
    Input x = input("x");
    Param embed = param("embed", {4, 3}, bf16);
    Param out = tie("output", embed);
    Tied() : Graph("tied") {}
    Outputs body() override { return {F::linear(x, out)}; }
  } g;
  Tensor e = random_tensor({4, 3});
  g.load_state_dict({{"embed", e}});  // "output" may be absent: it is the same param
  EXPECT_EQ(g.embed.tensor().dtype(), bf16);
  EXPECT_EQ(g.embed.tensor().data(), g.out.tensor().data());
  expect_close(g.embed.tensor(), e.to(bf16));
}

}  // namespace
