// Graphs compiled for the Vulkan device (lavapipe in CI): the same graph, plan and words as on
// the CPU, lowered into one command list recorded once; each call writes its words and submits.
// Skips, naming why, where this machine has no Vulkan device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "graph/test_util.hpp"
#include "iron/iron.hpp"
#if IRON_HAS_VULKAN
#include <chrono>

#include "devices/vulkan/device.hpp"
#endif

namespace F = iron::functional;
using iron::testing::pattern_tensor;

namespace {


struct Sums : iron::Graph {
  iron::Input a = input("a"), b = input("b"), row = input("row");
  Sums() : iron::Graph("sums") {}
  iron::Outputs body() override { return {(a + b) * b - a, a / row}; }
};

TEST(VulkanGraph, ElementwiseStepsMatchTheCpuAndTheReference) {
  IRON_NEEDS_VULKAN();
  Sums g, on_cpu;  // a graph's memory is on one device: one graph each
  const iron::Tensor b = pattern_tensor(4, 8, 2, 8.0f), row = pattern_tensor(1, 8, 3, 8.0f);
  const iron::Shapes shapes{{"a", {4, 8}}, {"b", {4, 8}}, {"row", {1, 8}}};
  auto& gpu = g.compile(shapes, {.device = "vulkan"});
  auto& cpu = on_cpu.compile(shapes, {.device = "cpu"});
  // Three calls of one recording, with different inputs each time.
  for (int call = 0; call < 3; ++call) {
    const iron::Tensor x = pattern_tensor(4, 8, 10 + call, 8.0f);
    const iron::RunResult got = gpu({x, b, row});
    const iron::RunResult ref = g.reference({x, b, row});
    const std::vector<iron::Tensor> want = cpu({x, b, row}).outputs;
    ASSERT_EQ(got.outputs.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(got.outputs[k].to_floats(), ref.outputs[k].to_floats()) << "call " << call << " output " << k;
      EXPECT_EQ(got.outputs[k].to_floats(), want[k].to_floats()) << "call " << call << " output " << k << " (CPU)";
    }
  }
}

struct Product : iron::Graph {
  iron::Input x = input("x"), w = input("w");
  Product() : iron::Graph("product") {}
  iron::Outputs body() override { return {F::linear(x, w)}; }
};

#if IRON_HAS_VULKAN
// A call that outlasts the device's wait limit is an error the caller gets; the graph (and its
// memory, which the call still reads) stays usable and is freed without a crash afterwards. On a
// loaded machine a 60 s timeout in MiniLM's Vulkan test ended in a SIGSEGV: the image's buffers
// were freed under the running commands.
TEST(VulkanGraph, ACallThatTimesOutIsAnErrorAndTheGraphWorksOn) {
  IRON_NEEDS_VULKAN();
  iron::vulkan::Device& device = iron::vulkan::shared_device();
  const std::chrono::nanoseconds limit = device.wait_limit();
  struct Restore {
    iron::vulkan::Device& device;
    std::chrono::nanoseconds limit;
    ~Restore() { device.set_wait_limit(limit); }
  } restore{device, limit};
  const iron::Tensor x = pattern_tensor(64, 512, 1, 8.0f), w = pattern_tensor(512, 512, 2, 8.0f);
  std::vector<float> want;
  {
    Product g;
    auto& gpu = g.compile({{"x", {64, 512}}, {"w", {512, 512}}}, {.device = "vulkan"});
    want = g.reference({x, w}).outputs[0].to_floats();
    device.set_wait_limit(std::chrono::microseconds(1));
    try {
      gpu({x, w});
      GTEST_SKIP() << "the device ran 64 x 512 x 512 within 1 us";
    } catch (const iron::Error& e) {
      EXPECT_NE(std::string(e.what()).find("timed out after 1 us"), std::string::npos) << e.what();
    }
    device.set_wait_limit(limit);
    const std::vector<float> got = gpu({x, w}).outputs[0].to_floats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3 * (1 + std::abs(want[i]))) << i;
    device.set_wait_limit(std::chrono::microseconds(1));
    EXPECT_THROW(gpu({x, w}), iron::Error);
  }  // the graph goes while its last call may still run
  device.set_wait_limit(limit);
  Product again;
  auto& gpu = again.compile({{"x", {64, 512}}, {"w", {512, 512}}}, {.device = "vulkan"});
  const std::vector<float> got = gpu({x, w}).outputs[0].to_floats();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3 * (1 + std::abs(want[i]))) << i;
}
#endif

TEST(VulkanGraph, AGraphStaysOnOneDeviceUntilReleased) {
  IRON_NEEDS_VULKAN();
  Sums g;
  g.compile({{"a", {2, 8}}, {"b", {2, 8}}, {"row", {1, 8}}}, {.device = "vulkan"});
  try {
    g.compile({{"a", {3, 8}}, {"b", {3, 8}}, {"row", {1, 8}}}, {.device = "cpu"});
    FAIL() << "compiled for the CPU while the graph's memory is on Vulkan";
  } catch (const iron::Error& e) {
    EXPECT_NE(std::string(e.what()).find("release() it before compiling for cpu"), std::string::npos) << e.what();
  }
  // A version compiled without naming a device takes the graph's.
  auto& v = g.compile({{"a", {3, 8}}, {"b", {3, 8}}, {"row", {1, 8}}});
  const iron::Tensor a = pattern_tensor(3, 8, 1, 8.0f), b = pattern_tensor(3, 8, 2, 8.0f), row = pattern_tensor(1, 8, 3, 8.0f);
  EXPECT_EQ(v({a, b, row}).outputs[0].to_floats(), g.reference({a, b, row}).outputs[0].to_floats());
}

// The device's own clock: each full run adds its time between the timestamps around its
// commands (lavapipe writes them); the CPU keeps no such clock.
TEST(VulkanGraph, EachRunAddsItsDeviceTime) {
  IRON_NEEDS_VULKAN();
  Sums g, on_cpu;
  const iron::Shapes shapes{{"a", {4, 8}}, {"b", {4, 8}}, {"row", {1, 8}}};
  auto& gpu = g.compile(shapes, {.device = "vulkan"});
  auto& cpu = on_cpu.compile(shapes, {.device = "cpu"});
  const iron::Tensor a = pattern_tensor(4, 8, 1, 8.0f), b = pattern_tensor(4, 8, 2, 8.0f), row = pattern_tensor(1, 8, 3, 8.0f);
  EXPECT_EQ(gpu.device_time().runs, 0);
  for (int call = 0; call < 3; ++call) {
    gpu({a, b, row});
    cpu({a, b, row});
  }
  EXPECT_EQ(cpu.device_time().runs, 0);
  const iron::DeviceTime t = gpu.device_time();
  if (t.runs == 0) GTEST_SKIP() << "this Vulkan device writes no timestamps on its compute queue";
  EXPECT_EQ(t.runs, 3);
  EXPECT_GT(t.seconds, 0);
  EXPECT_LT(t.seconds, 10);
  EXPECT_GE(t.dispatches, 4);  // (a + b) * b - a and a / row: at least one dispatch each
  // A relink (the arena's scratch grown by a larger version) keeps the runs counted so far.
  auto& larger = g.compile({{"a", {64, 8}}, {"b", {64, 8}}, {"row", {1, 8}}});
  larger({pattern_tensor(64, 8, 1, 8.0f), pattern_tensor(64, 8, 2, 8.0f), row});
  gpu({a, b, row});
  EXPECT_EQ(gpu.device_time().runs, 4);
  EXPECT_GE(gpu.device_time().seconds, t.seconds);
}

TEST(VulkanGraph, AnUnknownDeviceIsNamed) {
  Sums g;
  try {
    g.compile({{"a", {2, 8}}, {"b", {2, 8}}, {"row", {1, 8}}}, {.device = "tpu"});
    FAIL() << "compiled for a device that does not exist";
  } catch (const iron::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no device 'tpu': the devices are cpu and vulkan"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// More memory than the device has: one clear error naming what was asked for, and the graph
// still works for shapes that fit.
TEST(VulkanGraph, OutOfDeviceMemoryIsAClearError) {
  IRON_NEEDS_VULKAN();
  Sums g;
  const int64_t rows = int64_t(1) << 27;  // 4 GiB a buffer, more than lavapipe's 2 GiB heap
  try {
    g.compile({{"a", {rows, 8}}, {"b", {rows, 8}}, {"row", {1, 8}}}, {.device = "vulkan"});
    FAIL() << "a graph of 12 GiB compiled";
  } catch (const iron::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of device memory"), std::string::npos) << what;
  }
  const iron::Tensor a = pattern_tensor(2, 8, 1, 8.0f), b = pattern_tensor(2, 8, 2, 8.0f), row = pattern_tensor(1, 8, 3, 8.0f);
  auto& small = g.compile({{"a", {2, 8}}, {"b", {2, 8}}, {"row", {1, 8}}}, {.device = "vulkan"});
  EXPECT_EQ(small({a, b, row}).outputs[0].to_floats(), g.reference({a, b, row}).outputs[0].to_floats());
}

}  // namespace

namespace {
// An encoder's attention over two sentences of four rows (functional::segment_attention), over
// whole sentences or a bidirectional window.
struct SegmentAttention : iron::Graph {
  explicit SegmentAttention(int64_t w = 0) : window(w) {}
  int64_t window;
  iron::Input q = input("q"), k = input("k"), v = input("v"), lengths = input("lengths");
  iron::Outputs body() override {
    return {iron::functional::segment_attention(q, k, v, lengths, 4, {}, window)};
  }
};
}  // namespace

// An encoder's attention on the device, as on the CPU: each row sees its own sentence's valid
// rows only, and a padding row gives zeros (lengths 3 and 0: a sentence shorter than its
// segment, and an empty one).
TEST(VulkanGraph, SegmentAttentionMatchesTheCpu) {
  IRON_NEEDS_VULKAN();
  SegmentAttention g, on_cpu;
  const iron::Shapes shapes{{"q", {8, 2, 8}}, {"k", {8, 2, 8}}, {"v", {8, 2, 8}}, {"lengths", {{2}, iron::i32}}};
  auto& gpu = g.compile(shapes, {.device = "vulkan"});
  auto& cpu = on_cpu.compile(shapes, {.device = "cpu"});
  auto qkv = [](int seed) { return pattern_tensor(8, 16, seed, 8.0f).reshape({8, 2, 8}); };
  const iron::Tensor q = qkv(1), k = qkv(2), v = qkv(3);
  for (const std::vector<int32_t>& lengths : {std::vector<int32_t>{3, 4}, std::vector<int32_t>{4, 0}}) {
    const iron::Tensor l = iron::Tensor::from_ints(lengths, {2});
    const std::vector<float> got = gpu({q, k, v, l}).outputs[0].to_floats();
    const std::vector<float> want = cpu({q, k, v, l}).outputs[0].to_floats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
    // The padding rows (row 3 of the first sentence, or all of an empty one) are zeros.
    const size_t row = 2 * 8;
    if (lengths[0] == 3) {
      for (size_t i = 3 * row; i < 4 * row; ++i) EXPECT_EQ(got[i], 0.0f);
    }
    if (lengths[1] == 0) {
      for (size_t i = 4 * row; i < 8 * row; ++i) EXPECT_EQ(got[i], 0.0f);
    }
  }
}

// A bidirectional window of 2 (each row sees itself and one row either way) on the device, as on
// the CPU, for full, short and empty sentences.
TEST(VulkanGraph, WindowedSegmentAttentionMatchesTheCpu) {
  IRON_NEEDS_VULKAN();
  SegmentAttention g(2), on_cpu(2);
  const iron::Shapes shapes{{"q", {8, 2, 8}}, {"k", {8, 2, 8}}, {"v", {8, 2, 8}}, {"lengths", {{2}, iron::i32}}};
  auto& gpu = g.compile(shapes, {.device = "vulkan"});
  auto& cpu = on_cpu.compile(shapes, {.device = "cpu"});
  auto qkv = [](int seed) { return pattern_tensor(8, 16, seed, 8.0f).reshape({8, 2, 8}); };
  const iron::Tensor q = qkv(4), k = qkv(5), v = qkv(6);
  for (const std::vector<int32_t>& lengths : {std::vector<int32_t>{4, 3}, std::vector<int32_t>{1, 0}}) {
    const iron::Tensor l = iron::Tensor::from_ints(lengths, {2});
    const std::vector<float> got = gpu({q, k, v, l}).outputs[0].to_floats();
    const std::vector<float> want = cpu({q, k, v, l}).outputs[0].to_floats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
  }
}
