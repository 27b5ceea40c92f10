// Every error the spec documents, each asserting what its message names.
#include <gtest/gtest.h>

#include "iron/iron.hpp"
#include "test_util.hpp"

namespace F = iron::functional;
using namespace iron;
using iron::testing::expect_error;
using iron::testing::random_tensor;

namespace {

struct NormedLinear : Graph {
  Input x = input("x");
  Scratchpad n = scratchpad("n");
  Carried position = carried("position");
  Param w = param("w", {3, 4});
  Param g = param("g", {4});
  NormedLinear() : Graph("net") {}
  Outputs body() override {
    Handle y = F::linear(F::rms_norm(x[upto(n)], 4, g), w);
    return Outputs({y}, carry({{"position", Affine(position) + 1}}));
  }
};

void load(NormedLinear& net) { net.load_state_dict({{"w", random_tensor({3, 4})}, {"g", random_tensor({4})}}); }

// Called like a function outside any body: one plain sentence saying what to do instead.
TEST(Errors, AGraphCalledOutsideABodySaysToCompileIt) {
  NormedLinear net;
  expect_error([&] { net({}); }, ErrorKind::type,
               {"net: a graph is called like this only inside another graph's body; to run it on its own, compile it "
                "and call what compile() returns"});
}

TEST(Errors, RecordNamesMissingAndUnknownInputs) {
  NormedLinear net;
  load(net);
  expect_error([&] { net.compile({{"y", {2, 4}}}); }, ErrorKind::type, {"net", "shapes for [x] missing", "[y] are not inputs"});
}

TEST(Errors, LoadStateDictNamesEverythingWrongAtOnce) {
  NormedLinear net;
  expect_error([&] { net.load_state_dict({}, "model"); }, ErrorKind::value, {"'model' must end in a dot"});
  expect_error(
      [&] {
        net.load_state_dict({{"m.w", random_tensor({4, 3})}, {"m.extra", random_tensor({1})}, {"other", random_tensor({1})}},
                            "m.");
      },
      ErrorKind::value, {"net: cannot load", "missing m.g", "extra m.extra", "wrong shape m.w (4, 3), not (3, 4)"});
  expect_error([&] { net.load_state_dict({{"w", Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4})}, {"g", random_tensor({4})}}); },
               ErrorKind::value, {"wrong kind w i32, not f32"});
  load(net);
  expect_error([&] { load(net); }, ErrorKind::value, {"net: already loaded"});
}

TEST(Errors, AnUnloadedParamCannotCompile) {
  NormedLinear net;
  expect_error([&] { net.compile({{"x", {2, 4}}}); }, ErrorKind::type, {"net: w, g were never loaded"});
}

TEST(Errors, CallNamesMissingUnknownAndOversizedValues) {
  NormedLinear net;
  load(net);
  CompiledGraph& v = net.compile({{"x", {2, 4}}});
  Tensor x = random_tensor({2, 4});
  expect_error([&] { v({x}, {{"position", 0}}); }, ErrorKind::type, {"per-call value 'n' is missing"});
  expect_error([&] { v({x}, {{"n", 1}}); }, ErrorKind::type, {"'position' is missing", "seed its first call"});
  expect_error([&] { v({x}, {{"n", 1}, {"position", 0}, {"rows", 2}}); }, ErrorKind::type,
               {"no per-call value 'rows'", "it takes: n, position"});
  expect_error([&] { v({x}, {{"n", 1}, {"position", int64_t(1) << 30}}); }, ErrorKind::value,
               {"position=1073741824 is outside 30 bits"});
  expect_error([&] { v({x}, {{"n", -1}, {"position", 0}}); }, ErrorKind::value, {"n=-1 is outside 30 bits"});
  // A carried value is seeded once; later calls take what the last run carried.
  const auto& r = v({x}, {{"n", 1}, {"position", 7}});
  EXPECT_EQ(r.carried_value("position"), 8);
  EXPECT_EQ(v({x}, {{"n", 1}}).carried_value("position"), 9);
}

TEST(Errors, CallRefusesTensorsOfAnotherShapeOrDtype) {
  NormedLinear net;
  load(net);
  CompiledGraph& v = net.compile({{"x", {2, 4}}});
  expect_error([&] { v({random_tensor({3, 4})}, {{"n", 1}, {"position", 0}}); }, ErrorKind::value,
               {"input 'x' is (3, 4) f32", "this version takes (2, 4) f32"});
  expect_error([&] { v({random_tensor({2, 4}, bf16)}, {{"n", 1}, {"position", 0}}); }, ErrorKind::value, {"(2, 4) bf16"});
  expect_error([&] { v({}, {{"n", 1}, {"position", 0}}); }, ErrorKind::type, {"takes 1 tensor(s), got 0"});
}

TEST(Errors, ViewsRefuseWhatTheyCannotBe) {
  struct Views : Graph {
    Input x = input("x");
    Scratchpad i = scratchpad("i");
    Scratchpad j = scratchpad("j");
    int which = 0;
    Outputs body() override {
      Handle h = x;
      switch (which) {
        case 0:
          return {h.reshape({5})};
        case 1:
          return {h.T().reshape({6})};
        case 2:
          return {h.transpose({0, 0})};
        case 3:
          return {h.T().transpose({1, 0})};
        case 4:
          return {h[{at(i), at(j)}]};
        case 5:
          return {h[7]};
        default:
          return {h[{0, 1, 2}]};
      }
    }
  } g;
  auto with = [&](int which) {
    g.which = which;
    return [&] { g.record({{"x", {2, 3}}}); };
  };
  expect_error(with(0), ErrorKind::value, {"cannot reshape", "to (5,)"});
  expect_error(with(1), ErrorKind::value, {"cannot reshape a view"});
  expect_error(with(2), ErrorKind::value, {"axes (0, 0) do not permute a shape of rank 2"});
  expect_error(with(3), ErrorKind::value, {"cannot transpose a view"});
  expect_error(with(4), ErrorKind::value, {"two per-call indices"});
  expect_error(with(5), ErrorKind::index, {"index 7 is outside axis 0"});
  expect_error(with(6), ErrorKind::index, {"3 indices for"});
}

TEST(Errors, RecordingOnlyFunctionsNeedABody) {
  struct Plain : Graph {
    Input x = input("x");
    Outputs body() override { return {x}; }
  } g;
  expect_error([&] { g.inline_([] { return 0; }); }, ErrorKind::type, {"records into a graph's body"});
  expect_error([&] { on_host([](std::span<Tensor>) {}, {}); }, ErrorKind::type, {"on_host records into a graph's body"});
  expect_error([&] { F::silu(Handle()); }, ErrorKind::type, {"records into a graph's body"});
}

TEST(Errors, CarryNamesOnlyCarriedValues) {
  struct Bad : Graph {
    Input x = input("x");
    Scratchpad n = scratchpad("n");
    Outputs body() override { return Outputs({x}, carry({{"n", Affine(n) + 1}})); }
  } g;
  expect_error([&] { g.record({{"x", {2}}}); }, ErrorKind::type, {"carry names 'n', which is not a carried value"});
}

TEST(Errors, ClampHoldsAValueToARange) {
  struct Clamped : Graph {
    Input x = input("x");
    Scratchpad n = scratchpad("n");
    Outputs body() override { return {Handle(x)[upto(clamp(Affine(n) - 2, 0, 3))]}; }
  } g;
  CompiledGraph& v = g.compile({{"x", {4}}});
  Tensor x = Tensor::from({1, 2, 3, 4}, {4});
  EXPECT_EQ(v({x}, {{"n", 1}}).outputs[0].numel(), 0);
  EXPECT_EQ(v({x}, {{"n", 4}}).outputs[0].numel(), 2);
  EXPECT_EQ(v({x}, {{"n", 100}}).outputs[0].numel(), 3);
  expect_error([] { clamp(Affine(1), 3, 2); }, ErrorKind::value, {"low bound is above the high one"});
}

}  // namespace
