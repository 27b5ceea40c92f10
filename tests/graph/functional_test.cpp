// functional:: pieces beyond single operators: causal_conv1d with its ConvState across a prompt
// chunk and decode steps, matmul of one row, host steps, inline() under another graph's profile,
// and release().
#include <gtest/gtest.h>

#include "graph/arena.hpp"
#include "graph/recording.hpp"
#include "iron/iron.hpp"
#include "test_util.hpp"

namespace F = iron::functional;
using namespace iron;
using iron::testing::expect_close;
using iron::testing::random_tensor;

namespace {

constexpr int64_t K = 4, kChannels = 3, kChunk = 6;

struct Conv : Graph {
  Input x = input("x");
  Scratchpad rows = scratchpad("rows", 1);
  Param taps = param("taps", {K, kChannels});
  State conv = state("conv", {K - 1, kChannels});
  State window = state("window", {2, kChunk, kChannels});
  State tail = state("tail", {K - 1, kChannels});
  Conv() : Graph("conv") {}
  Outputs body() override {
    F::ConvState s{conv, conv, window, tail};
    Handle in = x.shape()[0] > 1 ? x[upto(rows)] : Handle(x);
    return {F::causal_conv1d(in, taps, s)};
  }
};

TEST(Functional, CausalConv1dCarriesItsStateFromAChunkIntoDecodeSteps) {
  Conv g;
  Tensor taps = random_tensor({K, kChannels}, f32, 11);
  g.load_state_dict({{"taps", taps}});
  const int64_t prompt = 5, steps = 6;
  Tensor sequence = random_tensor({prompt + steps, kChannels}, f32, 12);
  auto s = sequence.to_floats(), t = taps.to_floats();
  // y[r] = sum_k taps[k] * s[r - K + 1 + k], the rows before the first being zero.
  auto expected_row = [&](int64_t r) {
    std::vector<float> y(kChannels, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      int64_t at_row = r - K + 1 + k;
      if (at_row < 0) continue;
      for (int64_t c = 0; c < kChannels; ++c) y[size_t(c)] += t[size_t(k * kChannels + c)] * s[size_t(at_row * kChannels + c)];
    }
    return y;
  };
  CompiledGraph& chunk = g.compile({{"x", {kChunk, kChannels}}});
  CompiledGraph& step = g.compile({{"x", {1, kChannels}}});
  Tensor x = Tensor::zeros({kChunk, kChannels}, f32);
  std::copy_n(sequence.data_as<float>(), prompt * kChannels, x.mutable_data_as<float>());
  Tensor y = chunk({x}, {{"rows", prompt}}).outputs[0].clone();
  ASSERT_EQ(y.dim(0), prompt);
  for (int64_t r = 0; r < prompt; ++r) {
    auto want = expected_row(r);
    for (int64_t c = 0; c < kChannels; ++c) EXPECT_NEAR(y.to_floats()[size_t(r * kChannels + c)], want[size_t(c)], 1e-5);
  }
  for (int64_t r = prompt; r < prompt + steps; ++r) {
    Tensor row = sequence.rows(r, r + 1).clone();
    auto got = step({row}).outputs[0].to_floats();
    auto want = expected_row(r);
    for (int64_t c = 0; c < kChannels; ++c) EXPECT_NEAR(got[size_t(c)], want[size_t(c)], 1e-5) << "row " << r;
  }
}

TEST(Functional, MatmulOfOneRow) {
  struct Net : Graph {
    Input row = input("row");
    Input matrix = input("matrix");
    Outputs body() override { return {matmul(row, matrix)}; }
  } g;
  Tensor r = Tensor::from({1, 2, 3}, {3}), m = Tensor::from({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(g.compile({{"row", {3}}, {"matrix", {3, 2}}})({r, m}).outputs[0].to_floats(), (std::vector<float>{4, 5}));
  EXPECT_EQ(g.reference({r, m})[0].to_floats(), (std::vector<float>{4, 5}));
}

TEST(Functional, HostStepsRunBetweenDeviceSteps) {
  struct Net : Graph {
    Input x = input("x");
    State scratch = state("scratch", {4});
    Outputs body() override {
      Handle doubled = F::copy(x) + x;
      on_host([](std::span<Tensor> t) {
                const float* in = t[0].data_as<float>();
                float* out = t[1].mutable_data_as<float>();
                for (int i = 0; i < 4; ++i) out[i] = in[3 - i];  // reversed, on the host
              },
              {doubled}, {Handle(scratch)});
      return {F::copy(Handle(scratch)) + x};
    }
  } g;
  Tensor x = Tensor::from({1, 2, 3, 4}, {4});
  EXPECT_EQ(g.compile({{"x", {4}}})({x}).outputs[0].to_floats(), (std::vector<float>{9, 8, 7, 6}));
}

TEST(Functional, InlineRecordsUnderTheOtherGraphsProfile) {
  struct Inner : Graph {
    Param w = param("w", {8, 4});
    Outputs body() override { return {}; }
    Handle project(const Handle& x) { return F::linear(x, w); }
  };
  struct Outer : Graph {
    Input x = input("x");
    Inner inner = child<Inner>("inner");
    Param v = param("v", {8, 4});
    Outputs body() override {
      Handle a = inner.inline_([&] { return inner.project(x); });
      return {a, F::linear(x, v)};
    }
  } g;
  Profile p;
  p.add("GEMM", {{"tile_n", int64_t(3)}});
  g.inner.set_profile(p);
  g.load_state_dict({{"inner.w", random_tensor({8, 4})}, {"v", random_tensor({8, 4})}});
  CompiledGraph& v = g.compile({{"x", {2, 4}}});
  EXPECT_EQ(v.recording().steps[0].op->tunables().integer("tile_n"), 3);   // inner's profile
  EXPECT_EQ(v.recording().steps[1].op->tunables().integer("tile_n"), 16);  // the default
}

TEST(Functional, ReleaseFreesAndALaterCallLoadsAgain) {
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {2, 2});
    Outputs body() override { return {F::linear(x, w)}; }
  } g;
  g.load_state_dict({{"w", Tensor::from({1, 2, 3, 4}, {2, 2})}});
  CompiledGraph& v = g.compile({{"x", {1, 2}}});
  Tensor x = Tensor::from({1, 1}, {1, 2});
  EXPECT_EQ(v({x}).outputs[0].to_floats(), (std::vector<float>{3, 7}));
  g.release();
  EXPECT_EQ(g.arena().scratch_bytes(), 0);
  EXPECT_EQ(v({x}).outputs[0].to_floats(), (std::vector<float>{3, 7}));
}

}  // namespace

namespace {

TEST(Functional, SiluMulAndWritingIntoAViewMatchTheirParts) {
  struct Net : Graph {
    Input a = input("a");
    Input b = input("b");
    Scratchpad at_row = scratchpad("at_row");
    Param w = param("w", {6, 4});
    State cache = state("cache", {5, 6});
    Outputs body() override {
      Handle fused = F::silu_mul(a, b);
      Handle parts = F::silu(a) * b;
      Handle direct = F::linear(a, w, {}, Precision::highest, {}, Handle(cache)[window(at_row, 2)]);
      return {fused, parts, direct, F::linear(a, w), F::gelu_tanh_mul(a, b), F::gelu(a, "tanh") * b};
    }
  } g;
  g.load_state_dict({{"w", random_tensor({6, 4}, f32, 8)}});
  Tensor a = random_tensor({2, 4}, f32, 9), b = random_tensor({2, 4}, f32, 10);
  CompiledGraph& v = g.compile({{"a", {2, 4}}, {"b", {2, 4}}}, {.check = true});
  const auto& out = v({a, b}, {{"at_row", 3}});
  expect_close(out.outputs[0], out.outputs[1], 1e-6, 1e-6);
  expect_close(out.outputs[2], out.outputs[3], 1e-6, 1e-6);
  // GeGLU: the bits of the GELU step then the Mul step.
  EXPECT_EQ(out.outputs[4].to_floats(), out.outputs[5].to_floats());
  auto cache = v.read(g.cache).to_floats();
  auto want = out.outputs[3].to_floats();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(cache[size_t(18 + i)], want[size_t(i)]);  // rows 3 and 4
  EXPECT_EQ(cache[17], 0.0f);
}

}  // namespace

namespace {

TEST(Functional, LinearResidualEqualsLinearPlusTheResidual) {
  for (int64_t rows : {1, 5}) {
    struct Net : Graph {
      Input x = input("x");
      Input r = input("r");
      Param w = param("w", {64, 32}, keep_dtype);
      Outputs body() override { return {F::linear_residual(x, w, r), F::linear(x, w) + r}; }
    } g;
    g.load_state_dict({{"w", random_tensor({64, 32}, f32, 3).to(bf16)}});
    Tensor x = random_tensor({rows, 32}, f32, 4), r = random_tensor({rows, 64}, f32, 5);
    const auto& out = g.compile({{"x", {rows, 32}}, {"r", {rows, 64}}}, {.check = true})({x, r});
    expect_close(out.outputs[0], out.outputs[1], 1e-5, 1e-5);
  }
}

}  // namespace

namespace {

// A norm's weight need not be a param: given as an input it is read each call (the kernel
// converts a param's weight once, when it is made, since a param does not change).
TEST(Functional, NormWeightsGivenAsInputsAreReadEachCall) {
  struct Norms : Graph {
    Input x = input("x"), w = input("w"), b = input("b");
    Outputs body() override { return {F::rms_norm(x, 32, w, 1e-5), F::layer_norm(x, 32, w, b, 1e-5)}; }
  } g;
  const Tensor x = random_tensor({3, 32}, f32, 1);
  CompiledGraph& v = g.compile({{"x", {3, 32}}, {"w", {32}}, {"b", {32}}});
  for (int call = 0; call < 2; ++call) {
    const Tensor w = random_tensor({32}, f32, 10 + call), b = random_tensor({32}, f32, 20 + call);
    const auto& got = v({x, w, b});
    const auto want = g.reference({x, w, b});
    for (size_t k = 0; k < 2; ++k) expect_close(got.outputs[k], want.outputs[k], 1e-5, 1e-5);
  }
}

}  // namespace
