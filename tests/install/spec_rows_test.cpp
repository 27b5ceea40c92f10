// The spec's rows that a user reaches through the installed headers alone: this file includes
// nothing but <iron/iron.hpp>, and is built twice, into iron_tests (every sanitizer stage runs
// it) and against the installed package by tests/install/check.sh, as a user's program would be.
#include <gtest/gtest.h>

#include <iron/iron.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace F = iron::functional;
using iron::Handle;
using iron::Tensor;

namespace {

/// `fn` must raise an iron::Error of `kind` whose message holds `phrase` (`what`: the misuse).
template <class Fn>
void expect_error(Fn&& fn, iron::ErrorKind kind, const std::string& phrase, const char* what) {
  try {
    fn();
    ADD_FAILURE() << what << " was accepted";
  } catch (const iron::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

// An embedding lookup of host token ids that also writes a state: a bad id must be refused
// before the state changes.
struct RowLookup : iron::Graph {
  iron::Input ids = input("ids");
  iron::Scratchpad n = scratchpad("n");
  iron::Weight table = weight("table", Tensor::from({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}));
  iron::State seen = state("seen", {1, 2});
  RowLookup() : iron::Graph("lookup") {}
  iron::Outputs body() override {
    Handle rows = F::copy(table[ids[iron::upto(n)]]);
    Handle(seen).assign(F::copy(rows[iron::range(0, 1)]));
    return {rows};
  }
};

TEST(SpecRows, AHostIdOutsideItsTableIsRefusedBeforeAnythingRuns) {
  RowLookup g;
  auto& v = g.compile({{"ids", iron::InputSpec({3}, iron::i32)}});
  auto out = v({Tensor::from_ints({3, 1, 0}, {3})}, {{"n", 3}}).outputs[0].clone();
  EXPECT_EQ(out.to_floats(), (std::vector<float>{30, 31, 10, 11, 0, 1}));
  expect_error([&] { v({Tensor::from_ints({2, 4, 1}, {3})}, {{"n", 3}}); }, iron::ErrorKind::index,
               "id 4 at position 1 of input 'ids' is outside table's 4 rows", "an id past the table's rows");
  // Nothing ran: the state still holds the first call's row.
  EXPECT_EQ(v.read(g.seen).to_floats(), (std::vector<float>{30, 31}));
  // Ids past the valid rows are not read, so they are not checked either.
  EXPECT_NO_THROW(v({Tensor::from_ints({2, -7, 99}, {3})}, {{"n", 1}}));
  EXPECT_THROW(v({Tensor::from_ints({-1, 0, 0}, {3})}, {{"n", 1}}), iron::Error);
}

// Two versions of one graph: each one's outputs live until its own next call.
struct ScaleRows : iron::Graph {
  iron::Input x = input("x");
  ScaleRows() : iron::Graph("scale") {}
  iron::Outputs body() override { return {x * x, x + x}; }
};

TEST(SpecRows, AVersionsOutputsSurviveAnotherVersionsCall) {
  ScaleRows g;
  auto& prefill = g.compile({{"x", {4, 8}}});
  auto& decode = g.compile({{"x", {1, 8}}});
  std::vector<float> a(32), b(8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) + 1;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i) - 100;
  const auto& logits = prefill({Tensor::from(a, {4, 8})});
  std::vector<float> squares = logits.outputs[0].to_floats(), doubles = logits.outputs[1].to_floats();
  decode({Tensor::from(b, {1, 8})});
  decode({Tensor::from(b, {1, 8})});
  EXPECT_EQ(logits.outputs[0].to_floats(), squares);
  EXPECT_EQ(logits.outputs[1].to_floats(), doubles);
  EXPECT_EQ(squares[31], 32.0f * 32.0f);
}


// A loop whose token and position are carried on the device, with a host step that counts the
// tokens it sees into a state: a CarriedLoop of several steps against reference() stepped by
// hand, each reference call handing its carried values to the next.
struct Walker : iron::Graph {
  iron::Carried token = carried("token");
  iron::Carried position = carried("position");
  iron::Param embed = param("embed", {16, 8});
  iron::Param mix = param("mix", {16, 8});
  iron::State tokens = state("tokens", {40}, iron::i32);
  iron::State counts = state("counts", {16}, iron::i32);
  Walker() : iron::Graph("walker") {}
  iron::Outputs body() override {
    Handle x = F::copy(Handle(embed)[{iron::at(token)}]).reshape({1, 8});
    Handle logits = F::linear(x, mix);
    Handle next = F::argmax(logits);
    Handle(tokens)[iron::window(iron::Affine(position) + 1, 1)].assign(next);
    iron::on_host(
        [](std::span<Tensor> views) {
          int32_t t = views[0].data_as<int32_t>()[0];
          views[1].mutable_data_as<int32_t>()[t] += 1;
        },
        {next}, {counts});
    return iron::Outputs({logits}, iron::carry({{"token", next}, {"position", iron::Affine(position) + 1}}));
  }
};

Tensor random_matrix(int64_t rows, int64_t cols, unsigned seed) {
  std::vector<float> v(size_t(rows * cols));
  uint32_t s = seed;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    e = float(int(s >> 9) % 2001 - 1000) / 1000.0f;
  }
  return Tensor::from(v, {rows, cols});
}

TEST(SpecRows, ReferenceReturnsCarriedValuesAndRunsHostSteps) {
  Walker device, host;
  for (Walker* w : {&device, &host}) w->load_state_dict({{"embed", random_matrix(16, 8, 1)}, {"mix", random_matrix(16, 8, 2)}});
  auto& step = device.compile({});
  const int steps = 12;
  std::vector<int32_t> on_device;
  {
    // A host step runs between the device's commands, so this loop waits on each run.
    iron::CarriedLoop loop(step, step, 1);
    Tensor produced = step.read(device.tokens);
    for (int64_t k : loop.run(steps, {}, {{"token", 3}, {"position", 0}}))
      on_device.push_back(produced.data_as<int32_t>()[k + 2]);
  }
  std::vector<int32_t> stepped;
  int64_t token = 3, position = 0;
  for (int k = 0; k <= steps; ++k) {
    iron::RunResult r = host.reference({}, {{"token", token}, {"position", position}});
    ASSERT_EQ(r.carried.size(), 2u);
    EXPECT_EQ(r.carried_value("position"), position + 1);
    const std::vector<float> row = r[0].to_floats();
    EXPECT_EQ(r.carried_value("token"), std::max_element(row.begin(), row.end()) - row.begin());
    token = r.carried_value("token");
    position = r.carried_value("position");
    if (k > 0) stepped.push_back(int32_t(token));
  }
  EXPECT_EQ(on_device, stepped);
  // The host step ran once a call on both sides: 13 tokens counted each.
  std::vector<int32_t> counts = step.read(device.counts).to_ints();
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), steps + 1);
}

// What a user can see of a graph: its versions, their steps and tunables, and its memory.
TEST(SpecRows, DescribeAndStatsShowWhatThePlannerMade) {
  Walker g;
  g.load_state_dict({{"embed", random_matrix(16, 8, 1)}, {"mix", random_matrix(16, 8, 2)}});
  auto& step = g.compile({});
  step({}, {{"token", 1}, {"position", 0}});
  iron::VersionView v = step.describe();
  ASSERT_FALSE(v.steps.empty());
  bool saw_argmax = false, saw_matmul = false;
  for (const iron::StepView& s : v.steps) {
    saw_argmax |= s.op == "Sample";
    if (s.op.find("GEMV") != std::string::npos || s.op.find("GEMM") != std::string::npos) {
      saw_matmul = true;
      EXPECT_EQ(s.inputs.at(0), (iron::Shape{1, 8}));
      EXPECT_EQ(s.outputs.at(0), (iron::Shape{1, 16}));
      EXPECT_FALSE(s.tunables.empty()) << v.str();
    }
  }
  EXPECT_TRUE(saw_argmax) << v.str();
  EXPECT_TRUE(saw_matmul) << v.str();
  EXPECT_EQ(v.reads, (std::vector<std::string>{"token", "position"}));
  EXPECT_GT(v.output_bytes, 0);
  EXPECT_NE(v.str().find("steps"), std::string::npos);

  g.compile({}, {.check = true});
  iron::GraphStats s = g.stats();
  EXPECT_EQ(s.versions, 2u);
  EXPECT_GT(s.state_bytes, 0);
  // Two versions, each weight uploaded once.
  EXPECT_EQ(s.uploads, (std::vector<std::pair<std::string, int64_t>>{{"embed", 1}, {"mix", 1}})) << s.str();
}

// Handle.at with a per-call repeat: a cache read whose rows grow with the position, read in place.
struct Growing : iron::Graph {
  iron::Input x = input("x");  // (1, 4): this position's row
  iron::Scratchpad position = scratchpad("position");
  iron::State cache = state("cache", {16, 4});
  Growing() : iron::Graph("growing") {}
  iron::Outputs body() override {
    Handle(cache)[iron::window(position, 1)].assign(x);
    Handle seen = Handle(cache).at(iron::AccessPattern{0, {16, 4}, {4, 1}}, {16, 4}, {}, iron::Affine(position) + 1);
    return {F::silu(seen)};
  }
};

TEST(SpecRows, AtWithRepeatReadsAGrowingCacheWithoutACopy) {
  Growing g;
  auto& v = g.compile({{"x", {1, 4}}});
  int copies = 0;
  for (const auto& step : v.describe().steps) copies += step.op == "Copy";
  EXPECT_EQ(copies, 1) << v.describe().str();  // the write of x into the cache; the read is in place
  std::vector<float> rows;
  for (int p = 0; p < 5; ++p) {
    std::vector<float> row = {float(p), -float(p), 0.5f * float(p), 1.0f};
    rows.insert(rows.end(), row.begin(), row.end());
    Tensor got = v({Tensor::from(row, {1, 4})}, {{"position", p}}).outputs[0];
    ASSERT_EQ(got.shape(), (iron::Shape{p + 1, 4}));
    std::vector<float> want = g.reference({Tensor::from(row, {1, 4})}, {{"position", p}})[0].to_floats();
    std::vector<float> values = got.to_floats();
    ASSERT_EQ(values.size(), want.size());
    for (size_t i = 0; i < values.size(); ++i) {
      float x = rows[i];
      EXPECT_NEAR(values[i], x / (1.0f + std::exp(-x)), 1e-5f) << "position " << p << " element " << i;
      EXPECT_NEAR(values[i], want[i], 1e-5f);
    }
  }
  expect_error([&] { v({Tensor::zeros({1, 4}, iron::f32)}, {{"position", 16}}); }, iron::ErrorKind::index,
               "is 16, outside", "a position past the cache's rows");
}

// A walk seen as another shape: merged where contiguous, split, or refused when it would copy.
struct Walks : iron::Graph {
  iron::Input x = input("x");  // (16, 4)
  Walks() : iron::Graph("walks") {}
  iron::Outputs body() override {
    Handle rows = Handle(x).at(iron::AccessPattern{8, {4, 4}, {4, 1}}, {16});      // rows 2..5, flat
    Handle column = Handle(x).at(iron::AccessPattern{1, {16}, {4}}, {4, 4});       // column 1, as 4 x 4
    Handle length = Handle(x).at(iron::AccessPattern{0, {4, 4}, {16, 1}}, {4, 4}, {}, {}, iron::Affine(2));
    return {F::copy(rows), F::copy(column), F::copy(length)};
  }
};

TEST(SpecRows, AtSeesAWalkAsAnotherShapeWhereNoCopyIsNeeded) {
  Walks g;
  std::vector<float> data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i);
  const auto& r = g.compile({{"x", {16, 4}}})({Tensor::from(data, {16, 4})});
  std::vector<float> rows = r.outputs[0].to_floats(), column = r.outputs[1].to_floats();
  ASSERT_EQ(rows.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(rows[i], float(8 + i));
  ASSERT_EQ(r.outputs[1].shape(), (iron::Shape{4, 4}));
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(column[i], float(1 + 4 * i));
  // length 2 of the second dimension: the first two entries of each walked row.
  std::vector<float> length = r.outputs[2].to_floats(), want = g.reference({Tensor::from(data, {16, 4})})[2].to_floats();
  for (size_t row = 0; row < 4; ++row)
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(length[row * 4 + k], float(16 * row + k));
      EXPECT_EQ(want[row * 4 + k], float(16 * row + k));
    }

  struct Refused : iron::Graph {
    iron::Input x = input("x");
    iron::Outputs body() override {
      // Two entries of each of four rows are not one run: seen as 8 they would need a copy.
      return {F::copy(Handle(x).at(iron::AccessPattern{0, {4, 2}, {4, 1}}, {8}))};
    }
  } refused;
  expect_error([&] { refused.compile({{"x", {16, 4}}}); }, iron::ErrorKind::value,
               "cannot be seen as (8,) without a copy", "a walk that needs a copy, seen as another shape,");
}

// A graph called inside another's body records its steps there: directly, its per-call values
// standing for the caller's, or through inline_() of one of its methods.
struct SiluBlock : iron::Graph {
  iron::Input x = input("x");
  iron::Scratchpad rows = scratchpad("rows");
  iron::Param w = param("w", {6, 6});
  SiluBlock() : iron::Graph("block") {}
  Handle mix(const Handle& h) const { return F::silu(F::linear(h, w)); }
  iron::Outputs body() override { return {x + mix(x[iron::upto(rows)])}; }
};

struct TwoBlocks : iron::Graph {
  iron::Input x = input("x");
  // Declared first, so that the outer graph's slots differ from the blocks' own.
  iron::Scratchpad offset = scratchpad("offset", 1);
  iron::Scratchpad n = scratchpad("n");
  SiluBlock first = child<SiluBlock>("first");
  SiluBlock second = child<SiluBlock>("second");
  bool use_inline = false;
  TwoBlocks() : iron::Graph("two_blocks") {}
  iron::Outputs body() override {
    Handle h = first({x}, {{"rows", n}}).tensors.at(0);
    if (use_inline) return {h + second.inline_([&] { return second.mix(h[iron::upto(n)]); })};
    return second({h}, {{"rows", iron::clamp(iron::Affine(n), 0, 4)}});
  }
};

TEST(SpecRows, AGraphCalledInAnotherRecordsItsStepsThere) {
  Tensor w1 = random_matrix(6, 6, 3), w2 = random_matrix(6, 6, 4), x = random_matrix(5, 6, 5);
  SiluBlock alone1, alone2;
  alone1.load_state_dict({{"w", w1}});
  alone2.load_state_dict({{"w", w2}});
  for (bool use_inline : {false, true}) {
    TwoBlocks g;
    g.use_inline = use_inline;
    g.load_state_dict({{"first.w", w1}, {"second.w", w2}});
    auto& v = g.compile({{"x", {5, 6}}});
    for (int64_t n : {2, 4}) {
      Tensor got = v({x}, {{"n", n}}).outputs[0].clone();
      // The same two blocks compiled on their own, one after the other.
      Tensor h = alone1.compile({{"x", {5, 6}}})({x}, {{"rows", n}}).outputs[0].clone();
      Tensor padded = Tensor::zeros({5, 6}, iron::f32);
      std::copy_n(h.data_as<float>(), h.numel(), padded.mutable_data_as<float>());
      Tensor want = alone2.compile({{"x", {5, 6}}})({padded}, {{"rows", n}}).outputs[0].clone();
      ASSERT_EQ(got.shape(), want.shape()) << "inline " << use_inline << ", n " << n;
      EXPECT_EQ(got.to_floats(), want.to_floats()) << "inline " << use_inline << ", n " << n;
    }
  }
  // Outside a body, or with a value it does not take, a call is refused.
  SiluBlock b;
  b.load_state_dict({{"w", w1}});
  EXPECT_THROW(b({}), iron::Error);
  struct Wrong : iron::Graph {
    iron::Input x = input("x");
    SiluBlock inner = child<SiluBlock>("inner");
    iron::Outputs body() override { return inner({x}, {{"colums", 1}}); }
  } wrong;
  wrong.load_state_dict({{"inner.w", w1}});
  expect_error([&] { wrong.compile({{"x", {5, 6}}}); }, iron::ErrorKind::type,
               "no per-call value 'colums' (it takes: rows)", "an unknown per-call value");
}

// Wiring the device loop by hand: compile's feeds (or emit_to) say which version an Emit starts,
// start() runs without waiting, Run::wait() returns the result.
struct Counter : iron::Graph {
  iron::Input start_at = input("start_at", /*optional=*/true);  // (1,) i32: the first total
  iron::Carried total = carried("total");
  iron::Carried step = carried("step");
  iron::Scratchpad stride = scratchpad("stride");
  iron::State log = state("log", {32}, iron::i32);
  Counter() : iron::Graph("counter") {}
  iron::Outputs body() override {
    Handle now = start_at ? F::copy(Handle(start_at)) : F::scalar({iron::Affine(total), iron::Affine(stride)});
    Handle(log)[iron::window(step, 1)].assign(now);
    return iron::Outputs({now}, iron::carry({{"total", now}, {"step", iron::Affine(step) + 1}}));
  }
};

TEST(SpecRows, FeedsStartAndWaitWireADeviceLoopByHand) {
  Counter g;
  auto& body = g.compile({});
  auto& first = g.compile({{"start_at", iron::InputSpec({1}, iron::i32)}}, {.feeds = &body});
  // first is given the stride, which it does not read: its Emit hands it to body with the
  // carried total and step, so body's runs need nothing from the host.
  first({Tensor::from_ints({100}, {1})}, {{"step", 0}, {"stride", 7}});
  std::vector<iron::Run> runs;
  for (int k = 0; k < 5; ++k) runs.push_back(body.start());
  EXPECT_EQ(runs[4].wait().carried_value("total"), 100 + 5 * 7);
  for (const iron::Run& r : runs) EXPECT_TRUE(r.done());
  std::vector<int32_t> log = body.read(g.log).to_ints();
  EXPECT_EQ(std::vector<int32_t>(log.begin(), log.begin() + 6), (std::vector<int32_t>{100, 107, 114, 121, 128, 135}));
  // A value given to a started run overrides what was fed; a call on the host waits out the
  // runs started before it.
  body.start({}, {{"stride", 1}});
  body.start();
  EXPECT_EQ(body({}, {}).carried_value("total"), 138);

  // A run that fails (a value outside 30 bits) fails its wait, and so do the runs queued after
  // it, which would have read what it carried; then the graph runs on.
  iron::Run bad = body.start({}, {{"stride", int64_t(1) << 31}});
  iron::Run after = body.start();
  EXPECT_THROW(bad.wait(), iron::Error);
  EXPECT_THROW(after.wait(), iron::Error);
  EXPECT_EQ(body.start({}, {{"stride", 2}}).wait().carried_value("total"), 140);

  // emit_to's refusals.
  Counter other;
  EXPECT_THROW(first.emit_to(other.compile({})), iron::Error);
  ScaleRows plain;
  auto& no_emit = plain.compile({{"x", {1, 8}}});
  EXPECT_THROW(no_emit.emit_to(no_emit), iron::Error);
}

}  // namespace
