// The planner folds an RMSNorm that only matmuls read into those matmuls (graph/fold.cpp): the
// step disappears, every output is bitwise what the unfolded recording gives, and a norm that
// anything else reads, or whose input changes before its readers run, stays a step of its own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "graph/recording.hpp"
#include "iron/iron.hpp"
#include "test_util.hpp"

namespace F = iron::functional;
using namespace iron;
using iron::testing::random_tensor;

namespace {

constexpr int64_t kIn = 64, kOut = 48;

int norm_steps(const CompiledGraph& v) {
  int n = 0;
  for (const auto& s : v.recording().steps) n += s.op->name() == "RMSNorm";
  return n;
}

// A q8_0 weight (rows, k) of random int8 values and small scales, as a trained Linear's.
Tensor q8_weight(int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> bytes(size_t(rows * k / 32 * 34));
  for (size_t b = 0; b < bytes.size(); b += 34) {
    uint16_t scale = f32_to_f16(0.001f + 0.002f * float(rng() % 100) / 100.0f);
    std::memcpy(&bytes[b], &scale, 2);
    for (size_t i = 2; i < 34; ++i) bytes[b + i] = char(rng() & 0xff);
  }
  auto keep = std::make_shared<std::vector<char>>(std::move(bytes));
  return Tensor::wrap(keep->data(), {rows, k}, DType::q8_0, keep);
}

// A weight (n, kIn): q8_0 (the int8 path at medium) or f32.
Tensor weight(bool quantised, int64_t n, uint32_t seed) {
  return quantised ? q8_weight(n, kIn, seed) : random_tensor({n, kIn}, f32, seed, 0.2f);
}

// fn(precision, quantised, rows) for each precision, f32 and q8_0 weights, and one row of x (the
// GEMV loop), a few (tiles) and more than an int8 chunk.
template <class Fn>
void for_each_case(Fn&& fn) {
  for (Precision p : {Precision::highest, Precision::medium})
    for (bool quantised : {false, true})
      for (int64_t rows : {1, 3, 40}) {
        SCOPED_TRACE(std::string(name(p)) + (quantised ? " q8_0" : " f32") + " rows " +
                     std::to_string(rows));
        fn(p, quantised, rows);
      }
}

// h = rms_norm(x) read by two projections (one with a residual); `keep_norm` also returns h,
// which stops the fold.
struct NormThenProjections : Graph {
  Input x = input("x");
  Param g = param("g", {kIn});
  Param w1 = param("w1", {kOut, kIn}, keep_dtype);
  Param w2 = param("w2", {kIn, kIn}, keep_dtype);
  Precision precision;
  bool keep_norm;
  NormThenProjections(Precision p, bool keep) : Graph("block"), precision(p), keep_norm(keep) {}
  Outputs body() override {
    Handle h = F::rms_norm(x, kIn, g, 1e-5);
    std::vector<Handle> out{F::linear(h, w1, {}, precision),
                            F::linear_residual(h, w2, x, precision)};
    if (keep_norm) out.push_back(h);
    return Outputs(out);
  }
};

TEST(Fold, ANormOnlyMatmulsReadRunsInsideThemWithTheSameBits) {
  for_each_case([](Precision p, bool quantised, int64_t rows) {
    std::vector<std::pair<std::string, Tensor>> weights{{"g", random_tensor({kIn}, f32, 1)},
                                                        {"w1", weight(quantised, kOut, 2)},
                                                        {"w2", weight(quantised, kIn, 3)}};
    NormThenProjections folded(p, false), kept(p, true);
    folded.load_state_dict(weights);
    kept.load_state_dict(weights);
    Tensor x = random_tensor({rows, kIn}, f32, 4, 3.0f);
    CompiledGraph& fv = folded.compile({{"x", {rows, kIn}}});
    CompiledGraph& kv = kept.compile({{"x", {rows, kIn}}});
    EXPECT_EQ(norm_steps(fv), 0);
    EXPECT_EQ(norm_steps(kv), 1);
    const auto fo = fv({x}).outputs;
    const auto ko = kv({x}).outputs;
    for (size_t o = 0; o < 2; ++o) {
      auto a = fo[o].to_floats(), b = ko[o].to_floats();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(a[i], b[i]) << "output " << o << " element " << i;
    }
    // Each folded matmul against its own reference (norm included), step by step.
    NormThenProjections checked(p, false);
    checked.load_state_dict(weights);
    EXPECT_NO_THROW(checked.compile({{"x", {rows, kIn}}}, {.check = true})({x}));
  });
}

TEST(Fold, MatchesAnIndependentComputation) {
  NormThenProjections g(Precision::highest, false);
  Tensor gt = random_tensor({kIn}, f32, 1), w1 = random_tensor({kOut, kIn}, f32, 2, 0.2f),
         w2 = random_tensor({kIn, kIn}, f32, 3, 0.2f);
  g.load_state_dict({{"g", gt}, {"w1", w1}, {"w2", w2}});
  Tensor x = random_tensor({2, kIn}, f32, 4, 3.0f);
  const auto out = g.compile({{"x", {2, kIn}}})({x}).outputs;
  auto xs = x.to_floats(), gs = gt.to_floats(), a = w1.to_floats(), b = w2.to_floats();
  auto y1 = out[0].to_floats(), y2 = out[1].to_floats();
  for (int64_t r = 0; r < 2; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < kIn; ++i)
      ss += double(xs[size_t(r * kIn + i)]) * xs[size_t(r * kIn + i)];
    const double inv = 1.0 / std::sqrt(ss / kIn + 1e-5);
    for (int64_t n = 0; n < kOut; ++n) {
      double s = 0;
      for (int64_t i = 0; i < kIn; ++i)
        s += xs[size_t(r * kIn + i)] * inv * gs[size_t(i)] * a[size_t(n * kIn + i)];
      EXPECT_NEAR(y1[size_t(r * kOut + n)], s, 1e-5);
    }
    for (int64_t n = 0; n < kIn; ++n) {
      double s = xs[size_t(r * kIn + n)];
      for (int64_t i = 0; i < kIn; ++i)
        s += xs[size_t(r * kIn + i)] * inv * gs[size_t(i)] * b[size_t(n * kIn + i)];
      EXPECT_NEAR(y2[size_t(r * kIn + n)], s, 1e-5);
    }
  }
}

TEST(Fold, ANormAnythingElseReadsStaysAStep) {
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {kOut, kIn});
    Outputs body() override {
      Handle h = F::rms_norm(x, kIn);
      return {F::linear(h, w), F::silu(h)};
    }
  } g;
  g.load_state_dict({{"w", random_tensor({kOut, kIn}, f32, 2)}});
  EXPECT_EQ(norm_steps(g.compile({{"x", {1, kIn}}})), 1);
}

TEST(Fold, ANormWhoseInputIsOverwrittenBeforeItsReaderStaysAStep) {
  // h is the norm of the state's old contents; the state is overwritten before the matmul runs,
  // so folding (normalising the state when the matmul reads it) would change the result.
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {kOut, kIn});
    State s = state("s", {1, kIn});
    Outputs body() override {
      Handle h = F::rms_norm(s, kIn);
      Handle(s).assign(x);
      return {F::linear(h, w)};
    }
  } g;
  Tensor w = random_tensor({kOut, kIn}, f32, 2);
  g.load_state_dict({{"w", w}});
  CompiledGraph& v = g.compile({{"x", {1, kIn}}});
  EXPECT_EQ(norm_steps(v), 1);
  Tensor first = random_tensor({1, kIn}, f32, 5), second = random_tensor({1, kIn}, f32, 6);
  v({first});
  const Tensor got = v({second}).outputs[0];
  // The second call normalises what the first left in the state: `first`.
  auto xs = first.to_floats(), ws = w.to_floats(), y = got.to_floats();
  double ss = 0;
  for (float f : xs) ss += double(f) * f;
  const double inv = 1.0 / std::sqrt(ss / kIn + double(std::numeric_limits<float>::epsilon()));
  for (int64_t n = 0; n < kOut; ++n) {
    double want = 0;
    for (int64_t i = 0; i < kIn; ++i) want += xs[size_t(i)] * inv * ws[size_t(n * kIn + i)];
    EXPECT_NEAR(y[size_t(n)], want, 1e-5);
  }
}


constexpr int64_t kFfn = 80;

int steps_named(const CompiledGraph& v, const std::string& op) {
  int n = 0;
  for (const auto& s : v.recording().steps) n += s.op->name() == op;
  return n;
}

int64_t parts_of_first_matmul(const CompiledGraph& v) {
  for (const auto& s : v.recording().steps)
    if (s.op->params().contains("parts")) return s.op->params().integer("parts");
  return 0;
}

// A block's projections: q, k, v over one normalised x, then gate and up into a SwiGLU (or,
// `geglu`, a GeGLU: Gemma's). `apart` records a step between each pair, which stops every merge
// (the reference run).
struct Projections : Graph {
  Input x = input("x");
  Input z = input("z");
  Param g = param("g", {kIn});
  Param q = param("q", {kIn, kIn}, keep_dtype);
  Param k = param("k", {32, kIn}, keep_dtype);
  Param v = param("v", {32, kIn}, keep_dtype);
  Param gate = param("gate", {kFfn, kIn}, keep_dtype);
  Param up = param("up", {kFfn, kIn}, keep_dtype);
  Precision precision;
  bool apart, geglu;
  Projections(Precision p, bool a, bool gelu = false) : Graph("projections"), precision(p), apart(a), geglu(gelu) {}
  Outputs body() override {
    std::vector<Handle> out;
    auto between = [&] {
      if (apart) out.push_back(F::silu(z));
    };
    Handle h = F::rms_norm(x, kIn, g, 1e-5);
    out.push_back(F::linear(h, q, {}, precision));
    between();
    out.push_back(F::linear(h, k, {}, precision));
    between();
    out.push_back(F::linear(h, v, {}, precision));
    Handle gl = F::linear(x, gate, {}, precision);
    between();
    Handle ul = F::linear(x, up, {}, precision);
    between();
    out.push_back(geglu ? F::gelu_tanh_mul(gl, ul) : F::silu_mul(gl, ul));
    return Outputs(out);
  }
};

TEST(Merge, ProjectionsOverOneInputAreOneStepWithTheSameBits) {
  for (const bool geglu : {false, true})
  for_each_case([geglu](Precision p, bool quantised, int64_t rows) {
    SCOPED_TRACE(geglu ? "GeGLU" : "SwiGLU");
    const char* const gate_step = geglu ? "GeGLU" : "SwiGLU";
    // Mixed kinds in one step (as a Q4_K_M file mixes them): each weight's kernel takes its
    // own path, so they prepare `a` each in their own way.
    auto mixed = [&](int64_t n, uint32_t seed) {
      if (seed % 3 == 0) return random_tensor({n, kIn}, f32, seed, 0.2f).to(bf16);
      return seed % 3 == 1 ? q8_weight(n, kIn, seed) : random_tensor({n, kIn}, f32, seed, 0.2f);
    };
    std::vector<std::pair<std::string, Tensor>> weights{
        {"g", random_tensor({kIn}, f32, 1)},  {"q", weight(quantised, kIn, 2)},
        {"k", weight(quantised, 32, 3)},      {"v", weight(quantised, 32, 4)},
        {"gate", weight(quantised, kFfn, 5)}, {"up", weight(quantised, kFfn, 6)}};
    if (quantised && rows == 3)
      weights = {{"g", random_tensor({kIn}, f32, 1)},
                 {"q", mixed(kIn, 2)},
                 {"k", mixed(32, 3)},
                 {"v", mixed(32, 4)},
                 {"gate", mixed(kFfn, 5)},
                 {"up", mixed(kFfn, 6)}};
    Projections merged(p, false, geglu), apart(p, true, geglu);
    merged.load_state_dict(weights);
    apart.load_state_dict(weights);
    Tensor x = random_tensor({rows, kIn}, f32, 7, 3.0f), z = random_tensor({rows, kIn}, f32, 8);
    const Shapes shapes{{"x", {rows, kIn}}, {"z", {rows, kIn}}};
    CompiledGraph& mv = merged.compile(shapes);
    CompiledGraph& av = apart.compile(shapes);
    // q, k and v one step of three weights; gate, up and the SwiGLU (or GeGLU) one step.
    EXPECT_EQ(mv.recording().steps.size(), 2u);
    EXPECT_EQ(parts_of_first_matmul(mv), 3);
    EXPECT_EQ(steps_named(mv, gate_step), 0);
    EXPECT_EQ(steps_named(av, gate_step), 1);
    const auto ao = av({x, z}).outputs;
    // One thread runs every weight of a step (a kernel then prepares `a` anew where its path
    // differs from the last one's); two split them.
    for (int threads : {1, 2}) {
      CompiledGraph& mt = merged.compile(shapes, {.threads = threads});
      // A call on other rows first, so that nothing a kernel should make is left over from
      // an identical call (the pool's scratch is shared by every kernel and graph).
      mt({random_tensor({rows, kIn}, f32, 99, 2.0f), z});
      const auto mo = mt({x, z}).outputs;
      const std::vector<size_t> same_in_apart{0, 2, 4, 7};  // q, k, v, SwiGLU among apart's outputs
      for (size_t o = 0; o < 4; ++o) {
        auto a = mo[o].to_floats(), b = ao[same_in_apart[o]].to_floats();
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(a[i], b[i]) << threads << " threads, output " << o << " element " << i;
      }
    }
    Projections checked(p, false, geglu);
    checked.load_state_dict(weights);
    try {
      checked.compile(shapes, {.check = true})({x, z});
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  });
}

TEST(Merge, AGateReadElsewhereKeepsItsSwiGLUAStep) {
  struct Net : Graph {
    Input x = input("x");
    Param gate = param("gate", {kFfn, kIn});
    Param up = param("up", {kFfn, kIn});
    Outputs body() override {
      Handle g = F::linear(x, gate), u = F::linear(x, up);
      return {F::silu_mul(g, u), g};
    }
  } n;
  n.load_state_dict(
      {{"gate", random_tensor({kFfn, kIn}, f32, 1)}, {"up", random_tensor({kFfn, kIn}, f32, 2)}});
  CompiledGraph& v = n.compile({{"x", {2, kIn}}});
  EXPECT_EQ(parts_of_first_matmul(v), 2);  // the two projections still share a step
  EXPECT_EQ(steps_named(v, "SwiGLU"), 1);
}

TEST(Merge, AMatmulReadingAnotherOnesOutputIsNotMergedWithIt) {
  struct Net : Graph {
    Input x = input("x");
    Param a = param("a", {kIn, kIn});
    Param b = param("b", {kIn, kIn});
    Outputs body() override { return {F::linear(F::linear(x, a), b)}; }
  } n;
  n.load_state_dict(
      {{"a", random_tensor({kIn, kIn}, f32, 1)}, {"b", random_tensor({kIn, kIn}, f32, 2)}});
  CompiledGraph& v = n.compile({{"x", {1, kIn}}});
  EXPECT_EQ(v.recording().steps.size(), 2u);
  EXPECT_EQ(parts_of_first_matmul(v), 1);
}


TEST(Merge, TheMergedStepTakesItsTunablesFromTheProfile) {
  struct Net : Graph {
    Input x = input("x");
    Param a = param("a", {kIn, kIn});
    Param b = param("b", {32, kIn});
    Outputs body() override { return {F::linear(x, a), F::linear(x, b)}; }
  } n;
  n.load_state_dict(
      {{"a", random_tensor({kIn, kIn}, f32, 1)}, {"b", random_tensor({32, kIn}, f32, 2)}});
  Profile p;
  p.add("GEMM", {{"parts", int64_t(2)}, {"tile_n", int64_t(8)}});  // what `iron tune` writes for it
  n.set_profile(p);
  CompiledGraph& v = n.compile({{"x", {3, kIn}}});
  ASSERT_EQ(v.recording().steps.size(), 1u);
  EXPECT_EQ(v.recording().steps[0].op->tunables().integer("tile_n"), 8);
}


TEST(Merge, ProjectionsWritingIntoOneBufferStayApart) {
  // Disjoint windows of one state: merged, their threads would write one buffer at once, which
  // the planner does not prove safe, so it leaves them two steps (and the results as they were).
  struct Net : Graph {
    Input x = input("x");
    Param a = param("a", {kIn, kIn});
    Param b = param("b", {kIn, kIn});
    State both = state("both", {2, kIn});
    Outputs body() override {
      Handle first = F::linear(x, a, {}, Precision::highest, {}, Handle(both)[window(0, 1)]);
      Handle second = F::linear(x, b, {}, Precision::highest, {}, Handle(both)[window(1, 1)]);
      return {first, second};
    }
  } n;
  Tensor a = random_tensor({kIn, kIn}, f32, 1), b = random_tensor({kIn, kIn}, f32, 2);
  n.load_state_dict({{"a", a}, {"b", b}});
  CompiledGraph& v = n.compile({{"x", {1, kIn}}});
  EXPECT_EQ(v.recording().steps.size(), 2u);
  Tensor x = random_tensor({1, kIn}, f32, 3);
  v({x});
  auto both = v.read(n.both).to_floats(), xs = x.to_floats(), as = a.to_floats(), bs = b.to_floats();
  for (int64_t o = 0; o < kIn; ++o) {
    double want_a = 0, want_b = 0;
    for (int64_t i = 0; i < kIn; ++i) {
      want_a += double(xs[size_t(i)]) * as[size_t(o * kIn + i)];
      want_b += double(xs[size_t(i)]) * bs[size_t(o * kIn + i)];
    }
    EXPECT_NEAR(both[size_t(o)], want_a, 1e-4);
    EXPECT_NEAR(both[size_t(kIn + o)], want_b, 1e-4);
  }
}

}  // namespace

namespace {

TEST(Merge, ASwiGLUThatBroadcastsUpStaysAStep) {
  // up's (rows, 4) read as one row of 8 under gate's (rows, 8): the pair of projections may
  // merge, but the SwiGLU is not theirs to finish row by row.
  struct Net : Graph {
    Input x = input("x");
    Param gate = param("gate", {8, kIn});
    Param up = param("up", {4, kIn});
    Outputs body() override { return {F::silu_mul(F::linear(x, gate), F::linear(x, up))}; }
  } n, checked;
  std::vector<std::pair<std::string, Tensor>> weights{{"gate", random_tensor({8, kIn}, f32, 1)},
                                                      {"up", random_tensor({4, kIn}, f32, 2)}};
  n.load_state_dict(weights);
  checked.load_state_dict(weights);
  Tensor x = random_tensor({2, kIn}, f32, 3);
  CompiledGraph& v = n.compile({{"x", {2, kIn}}});
  EXPECT_EQ(steps_named(v, "SwiGLU"), 1);
  const Tensor got = v({x}).outputs[0].clone();
  const Tensor want = checked.compile({{"x", {2, kIn}}}, {.check = true})({x}).outputs[0];
  iron::testing::expect_close(got, want, 1e-5, 1e-5);
}

TEST(Merge, FoldedNormsWithDifferentWeightsStayApart) {
  // Two norms whose weights are rows of one parameter: folded, each matmul carries its own row,
  // so the two cannot share one step (which holds one norm weight).
  struct Net : Graph {
    Input x = input("x");
    Param g = param("g", {2, kIn});
    Param a = param("a", {kOut, kIn});
    Param b = param("b", {kOut, kIn});
    Outputs body() override {
      Handle h1 = F::rms_norm(x, kIn, Handle(g)[0], 1e-5), h2 = F::rms_norm(x, kIn, Handle(g)[1], 1e-5);
      return {F::linear(h1, a), F::linear(h2, b)};
    }
  } n;
  Tensor g = random_tensor({2, kIn}, f32, 1), a = random_tensor({kOut, kIn}, f32, 2),
         b = random_tensor({kOut, kIn}, f32, 3);
  n.load_state_dict({{"g", g}, {"a", a}, {"b", b}});
  Tensor x = random_tensor({1, kIn}, f32, 4, 3.0f);
  const auto out = n.compile({{"x", {1, kIn}}})({x}).outputs;
  auto xs = x.to_floats(), gs = g.to_floats(), as = a.to_floats(), bs = b.to_floats();
  double ss = 0;
  for (float f : xs) ss += double(f) * f;
  const double inv = 1.0 / std::sqrt(ss / kIn + 1e-5);
  for (int which = 0; which < 2; ++which) {
    auto y = out[size_t(which)].to_floats();
    const auto& w = which == 0 ? as : bs;
    for (int64_t o = 0; o < kOut; ++o) {
      double want = 0;
      for (int64_t i = 0; i < kIn; ++i)
        want += xs[size_t(i)] * inv * gs[size_t(which * kIn + i)] * w[size_t(o * kIn + i)];
      EXPECT_NEAR(y[size_t(o)], want, 1e-4) << "output " << which << " element " << o;
    }
  }
}

}  // namespace

// ---- epilogues: a Linear's bias, its GELU and a residual folded into the matmul --------------

// q and k with biases over x, a feed-forward gelu(z W1 + b1) W2 + b2 + z. With `bias_inputs`
// the biases are inputs (not resident rows), which stops every fold: the reference run.
struct Feedforward : Graph {
  Input x = input("x"), z = input("z");
  Input bq_in = input("bq_in"), b1_in = input("b1_in"), b2_in = input("b2_in");
  Param wq = param("wq", {kOut, kIn}, keep_dtype), wk = param("wk", {kOut, kIn}, keep_dtype);
  Param bq = param("bq", {kOut}), bk = param("bk", {kOut});
  Param w1 = param("w1", {kFfn, kIn}, keep_dtype), b1 = param("b1", {kFfn});
  Param w2 = param("w2", {kIn, kFfn}), b2 = param("b2", {kIn});
  Precision precision;
  bool bias_inputs;
  Feedforward(Precision p, bool inputs) : Graph("ff"), precision(p), bias_inputs(inputs) {}
  Outputs body() override {
    Handle q = F::linear(x, wq, bias_inputs ? Handle(bq_in) : Handle(bq), precision);
    Handle k = F::linear(x, wk, bk, precision);
    Handle f = F::gelu(F::linear(z, w1, bias_inputs ? Handle(b1_in) : Handle(b1), precision));
    Handle y = F::linear(f, w2, bias_inputs ? Handle(b2_in) : Handle(b2), precision) + z;
    return {q, k, y};
  }
};

TEST(Fold, BiasGeluAndResidualRunInsideTheMatmulWithTheSameBits) {
  for_each_case([](Precision p, bool quantised, int64_t rows) {
    const Tensor bq = random_tensor({kOut}, f32, 11), b1 = random_tensor({kFfn}, f32, 12),
                 b2 = random_tensor({kIn}, f32, 13);
    std::vector<std::pair<std::string, Tensor>> weights{
        {"wq", weight(quantised, kOut, 2)}, {"wk", weight(quantised, kOut, 3)}, {"bq", bq},
        {"bk", random_tensor({kOut}, f32, 14)}, {"w1", weight(quantised, kFfn, 4)}, {"b1", b1},
        {"w2", random_tensor({kIn, kFfn}, f32, 5, 0.2f)}, {"b2", b2}};
    Feedforward folded(p, false), kept(p, true);
    folded.load_state_dict(weights);
    kept.load_state_dict(weights);
    // x of unit scale: what the matmuls' medium tolerance is written for (check mode below).
    const Tensor x = random_tensor({rows, kIn}, f32, 6, 1.0f);
    const Tensor z = random_tensor({rows, kIn}, f32, 7, 1.0f);
    const Shapes shapes{{"x", {rows, kIn}}, {"z", {rows, kIn}}, {"bq_in", {kOut}}, {"b1_in", {kFfn}}, {"b2_in", {kIn}}};
    CompiledGraph& fv = folded.compile(shapes);
    CompiledGraph& kv = kept.compile(shapes);
    // Folded: no Add is left; the GELU joins a ProjectionGEMM (not highest's GEMM or GEMV).
    EXPECT_EQ(steps_named(fv, "Add"), 0);
    EXPECT_EQ(steps_named(fv, "GELU"), p == Precision::highest ? 1 : 0);
    EXPECT_EQ(steps_named(kv, "Add"), 4);  // three input biases and the residual
    // q and k, their biases folded, merge into one step again.
    EXPECT_EQ(parts_of_first_matmul(fv), 2);
    const auto fo = fv({x, z, bq, b1, b2}).outputs;
    const auto ko = kv({x, z, bq, b1, b2}).outputs;
    for (size_t o = 0; o < 3; ++o) {
      auto a = fo[o].to_floats(), b = ko[o].to_floats();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "output " << o << " element " << i;
    }
    // Each folded matmul against its own reference (bias and residual included), step by step.
    Feedforward checked(p, false);
    checked.load_state_dict(weights);
    EXPECT_NO_THROW(checked.compile(shapes, {.check = true})({x, z, bq, b1, b2}));
  });
}

TEST(Fold, ABiasWhoseMatmulOutputIsReadElsewhereStaysAStep) {
  // h is read by the bias Add and by the residual Add: neither can take the matmul's place.
  struct Net : Graph {
    Input x = input("x");
    Param w = param("w", {kIn, kIn}), b = param("b", {kIn});
    Outputs body() override {
      Handle h = F::linear(x, w, {}, Precision::medium);
      return {h + b, h + x};
    }
  } g;
  g.load_state_dict({{"w", random_tensor({kIn, kIn}, f32, 2)}, {"b", random_tensor({kIn}, f32, 3)}});
  EXPECT_EQ(steps_named(g.compile({{"x", {4, kIn}}}), "Add"), 2);
}

TEST(Fold, AGeluOverAnInputAnotherMatmulReadsStaysAStepAndTheMatmulsMerge) {
  // Gemma's gelu_tanh(x Wg) * (x Wu): merging gate and up (one step over x) is kept.
  struct Net : Graph {
    Input x = input("x");
    Param wg = param("wg", {kFfn, kIn}), wu = param("wu", {kFfn, kIn});
    Outputs body() override {
      // Recorded gate, up, then the GELU, as gemma3.cpp does: the operands of one `*` are
      // recorded in whichever order the compiler evaluates them (GCC's is up first on x86-64,
      // gate first on aarch64, and a GELU between the matmuls stops their merge).
      Handle gate = F::linear(x, wg, {}, Precision::medium);
      Handle up = F::linear(x, wu, {}, Precision::medium);
      return {F::gelu(gate, "tanh") * up};
    }
  } g;
  g.load_state_dict({{"wg", random_tensor({kFfn, kIn}, f32, 2)}, {"wu", random_tensor({kFfn, kIn}, f32, 3)}});
  CompiledGraph& v = g.compile({{"x", {4, kIn}}});
  EXPECT_EQ(steps_named(v, "GELU"), 1);
  EXPECT_EQ(parts_of_first_matmul(v), 2);
}
