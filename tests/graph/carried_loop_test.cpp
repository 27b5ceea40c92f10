// CarriedLoop: a linked list held in a state, walked on the device one node a step; each step's
// Emit carries the next node and step index into the next run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "iron/iron.hpp"
#include "test_util.hpp"

namespace F = iron::functional;
using namespace iron;
using iron::testing::expect_error;

namespace {

constexpr int kNodes = 37;

struct CarriedWalk : Graph {
  Input start = input("start", /*optional=*/true);  // (1,) i32: the first node, on the first call only
  Carried node = carried("node");
  Carried step = carried("step");
  State next = state("next", {kNodes}, i32);
  State visited = state("visited", {64}, i32);
  CarriedWalk() : Graph("walk") {}
  Outputs body() override {
    Handle current = start ? F::copy(Handle(start)[0]) : F::copy(Handle(next)[at(node)]);
    Handle(visited)[at(step)].assign(current);
    return Outputs({}, carry({{"node", current}, {"step", Affine(step) + 1}}));
  }
};

std::vector<int32_t> successors() {
  std::vector<int32_t> next(kNodes);
  for (int i = 0; i < kNodes; ++i) next[size_t(i)] = (i * 7 + 3) % kNodes;  // a permutation
  return next;
}

void fill_list(CompiledGraph& v, CarriedWalk& g) {
  Tensor next = v.read(g.next);
  auto s = successors();
  std::memcpy(next.mutable_data(), s.data(), s.size() * 4);
  v.push(g.next);
}

// A device and whether Vulkan may chain the steps itself (IRON_VULKAN_CHAIN=0: the run queue
// steps them, the host writing each step's words, as where shaders lack 64-bit integers).
struct Stepping {
  const char* device;
  bool chain;
};

std::string stepping_name(const Stepping& s) {
  return std::string(s.device) + (std::string(s.device) == "cpu" ? "" : s.chain ? "_chained" : "_queued");
}

void PrintTo(const Stepping& s, std::ostream* os) { *os << stepping_name(s); }

class SteppedOn {
 public:
  explicit SteppedOn(const Stepping& s) {
    if (const char* v = std::getenv("IRON_VULKAN_CHAIN")) before_ = v;
    if (s.chain)
      ::unsetenv("IRON_VULKAN_CHAIN");
    else
      ::setenv("IRON_VULKAN_CHAIN", "0", 1);
  }
  ~SteppedOn() {
    if (before_)
      ::setenv("IRON_VULKAN_CHAIN", before_->c_str(), 1);
    else
      ::unsetenv("IRON_VULKAN_CHAIN");
  }

 private:
  std::optional<std::string> before_;
};

#define IRON_NEEDS_DEVICE(device)                                          \
  do {                                                                     \
    if (std::string(device) == "vulkan") IRON_NEEDS_VULKAN();              \
  } while (0)

// A CarriedWalk compiled on `device`, its list filled: the loop's first version and its body.
struct WalkOn {
  CarriedWalk g;
  CompiledGraph& first;
  CompiledGraph& body;
  explicit WalkOn(const char* device)
      : first(g.compile({{"start", InputSpec({1}, i32)}}, {.device = device})), body(g.compile({})) {
    fill_list(first, g);
  }
};

class CarriedLoopDepth : public ::testing::TestWithParam<std::tuple<Stepping, int>> {};

TEST_P(CarriedLoopDepth, WalksALinkedListExactly) {
  const auto [stepping, depth] = GetParam();
  IRON_NEEDS_DEVICE(stepping.device);
  SteppedOn on(stepping);
  WalkOn walk_on(stepping.device);
  CarriedWalk& g = walk_on.g;
  CompiledGraph& body = walk_on.body;
  CarriedLoop loop(walk_on.first, body, depth);
  const int steps = 40;
  int64_t expected_index = 0;
  auto walk = loop.run(steps, {Tensor::from_ints({5}, {1})}, {{"step", 0}, {"node", 0}});
  // Vulkan chains the steps on the device wherever its shaders have 64-bit integers (lavapipe,
  // and every GPU we know of): else the run queue steps them, the host writing their words.
  const bool int64 = std::string(stepping.device) == "vulkan" &&
                     iron::test::vulkan_shader_int64();
  EXPECT_EQ(walk.chained(), stepping.chain && int64);
  auto next = successors();
  int32_t node = 5;
  for (int64_t k : walk) {
    EXPECT_EQ(k, expected_index++);
    node = next[size_t(node)];
    EXPECT_EQ(walk.carried("node"), node) << "step " << k;
    EXPECT_EQ(walk.carried("step"), k + 2) << "step " << k;
  }
  EXPECT_EQ(expected_index, steps);
  auto visited = body.read(g.visited).to_ints();
  node = 5;
  EXPECT_EQ(visited[0], node);
  for (int k = 1; k <= steps; ++k) {
    node = next[size_t(node)];
    EXPECT_EQ(visited[size_t(k)], node) << "step " << k;
  }
  // The version carries on from the last step, as after a call: one more plain call is step 41.
  body({});
  EXPECT_EQ(body.read(g.visited).to_ints()[size_t(steps + 1)], next[size_t(node)]);
}

const Stepping kSteppings[] = {{"cpu", false}, {"vulkan", true}, {"vulkan", false}};

INSTANTIATE_TEST_SUITE_P(Depths, CarriedLoopDepth,
                         ::testing::Combine(::testing::ValuesIn(kSteppings), ::testing::Values(1, 2, 3)),
                         [](const auto& param_info) {
                           return stepping_name(std::get<0>(param_info.param)) + "_depth" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

// A walk compiled on the parameter's device, stepped as it says; skipped without the device.
class CarriedLoopOn : public ::testing::TestWithParam<Stepping> {
 protected:
  void SetUp() override {
    IRON_NEEDS_DEVICE(GetParam().device);
    on_ = std::make_unique<SteppedOn>(GetParam());
    walk_ = std::make_unique<WalkOn>(GetParam().device);
  }
  CarriedWalk& g() { return walk_->g; }
  CompiledGraph& first() { return walk_->first; }
  CompiledGraph& body() { return walk_->body; }

 private:
  std::unique_ptr<SteppedOn> on_;
  std::unique_ptr<WalkOn> walk_;
};

// `step` indexes `visited` (64 entries): the step whose words index entry 64 fails as a call
// would, on every device at the same step with the same error, and nothing is written past the
// state's end. On the chained device the refused step (and each queued after it) runs again
// with the words before it, writing what that step wrote.
TEST_P(CarriedLoopOn, ACarriedValuePastItsViewFailsAtTheSameStepWithTheSameError) {
  CarriedLoop loop(first(), body(), 3);
  int64_t reached = -1;
  std::string error;
  try {
    for (int64_t k : loop.run(70, {Tensor::from_ints({5}, {1})}, {{"step", 0}, {"node", 0}})) reached = k;
  } catch (const Error& e) {
    error = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::index) << e.what();
  }
  // Steps 0..62 write entries 1..63; step 63 would write entry 64.
  EXPECT_EQ(reached, 62);
  EXPECT_NE(error.find("the values index or bound a view outside it"), std::string::npos) << error;
  EXPECT_NE(error.find("is 64, outside [0, 64)"), std::string::npos) << error;
  auto visited = body().read(g().visited).to_ints();
  auto next = successors();
  int32_t node = 5;
  for (int k = 1; k < 64; ++k) {
    node = next[size_t(node)];
    EXPECT_EQ(visited[size_t(k)], node) << "entry " << k;
  }
}

// The first step's words already past the view (first leaves step 64): that step's wait
// throws, as any step's, and nothing is written past the state's end.
TEST_P(CarriedLoopOn, AFirstStepPastItsViewFailsAtItsWait) {
  CarriedLoop loop(first(), body(), 2);
  auto steps = loop.run(5, {Tensor::from_ints({5}, {1})}, {{"step", 63}, {"node", 0}});
  expect_error([&] { steps.begin(); }, ErrorKind::index, {"is 64, outside [0, 64)"});
  EXPECT_EQ(body().read(g().visited).to_ints()[63], 5);
}

// While a loop's steps are chained on the device, they make their words from what the last
// one left in the graph's scratch: any other call, start or compile of the graph is refused
// with an error saying why (on the queue path the queue orders them); once the loop is done,
// calls work again and carry on from its last step.
TEST_P(CarriedLoopOn, OtherWorkOnTheGraphWaitsForTheLoopsEnd) {
  CarriedLoop loop(first(), body(), 3);
  {
    auto steps = loop.run(10, {Tensor::from_ints({5}, {1})}, {{"step", 0}, {"node", 0}});
    for (int64_t k : steps) {
      if (k != 2 || !steps.chained()) continue;
      const std::string why = "a CarriedLoop's steps are running on the device";
      expect_error([&] { body()({}); }, ErrorKind::value, {why});
      expect_error([&] { body().start(); }, ErrorKind::value, {why});
      expect_error([&] { g().compile({{"start", InputSpec({2}, i32)}}); }, ErrorKind::value, {why});
    }
  }
  EXPECT_EQ(body()({}).carried_value("step"), 12);
}

TEST_P(CarriedLoopOn, ClosingEarlyWaitsOutTheStepsInFlight) {
  Tensor visited_state = first().read(g().visited);
  std::fill_n(visited_state.mutable_data_as<int32_t>(), 64, -1);
  first().push(g().visited);
  CarriedLoop loop(first(), body(), 3);
  int taken = 0;
  {
    auto steps = loop.run(30, {Tensor::from_ints({1}, {1})}, {{"step", 0}, {"node", 0}});
    for (int64_t k : steps) {
      if (k == 4) break;
      ++taken;
    }
  }
  auto visited = body().read(g().visited).to_ints();
  // first wrote entry 0; body steps 0..4 wrote entries 1..5 and were yielded; at most
  // depth - 1 = 2 more were in flight when the loop closed, and every one of those finished.
  int written = 0;
  for (int i = 1; i < 64; ++i) written += visited[size_t(i)] != -1;
  EXPECT_EQ(taken, 4);
  EXPECT_GE(written, 5);
  EXPECT_LE(written, 5 + 2);
  for (int i = 1; i <= written; ++i) EXPECT_NE(visited[size_t(i)], -1) << "a gap at " << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, CarriedLoopOn, ::testing::ValuesIn(kSteppings),
                         [](const auto& param_info) { return stepping_name(param_info.param); });

TEST(CarriedLoop, RefusesWhatTheSpecRefuses) {
  CarriedWalk g;
  CompiledGraph& first = g.compile({{"start", InputSpec({1}, i32)}});
  CompiledGraph& body = g.compile({});
  expect_error([&] { CarriedLoop(first, body, 0); }, ErrorKind::value, {"depth is at least 1, got 0"});
  expect_error([&] { CarriedLoop(first, first, 1); }, ErrorKind::value, {"takes no tensor", "start"});
  CarriedWalk other;
  expect_error([&] { CarriedLoop(first, other.compile({}), 1); }, ErrorKind::value, {"versions of one graph"});
  struct NoCarry : Graph {
    Input x = input("x");
    Outputs body() override { return {F::silu(x)}; }
  } plain;
  CompiledGraph& p = plain.compile({{"x", {2}}});
  expect_error([&] { CarriedLoop(p, p, 1); }, ErrorKind::value, {"no iron::carry"});
}

}  // namespace

namespace iron::test {
namespace {

// Run::cancel drops the started runs the device has not begun: a run in progress finishes, the
// rest complete unrun and their wait() says they were cancelled. Each run here takes 20 ms on
// the host, so 12 started runs are still queued when cancel() comes.
TEST(CarriedLoop, CancelDropsTheRunsNotBegun) {
  static std::atomic<int> ran{0};
  ran = 0;
  struct Slow : Graph {
    Input x = input("x");
    Slow() : Graph("slow") {}
    Outputs body() override {
      Handle y = Handle(x) + Handle(x);
      on_host([](std::span<Tensor>) {
        ++ran;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }, {y}, {});
      return {y};
    }
  } g;
  CompiledGraph& v = g.compile({{"x", {4}}});
  const Tensor x = Tensor::from(std::vector<float>{1, 2, 3, 4}, {4});
  std::vector<iron::Run> runs;
  for (int i = 0; i < 12; ++i) runs.push_back(v.start({x}));
  runs[2].cancel();
  runs[0].wait();
  int cancelled = 0;
  for (size_t i = 2; i < runs.size(); ++i) try {
      runs[i].wait();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
      ++cancelled;
    }
  EXPECT_GE(cancelled, 8);  // at most runs 0..3 had begun when cancel() came
  EXPECT_EQ(ran.load() + cancelled, 12);
  // The graph runs as before afterwards.
  EXPECT_EQ(v({x}).outputs[0].to_floats(), (std::vector<float>{2, 4, 6, 8}));
}

}  // namespace
}  // namespace iron::test
