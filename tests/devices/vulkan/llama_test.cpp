// Whole models on the Vulkan device (lavapipe in CI), against what the CPU is held to: stories260K's
// published greedy tokens at depth 1 and 3, and chunked prefill then decode equal to decoding
// token by token. The Release build runs them; a sanitizer build skips them (Mesa is not
// instrumented, and the op harness covers the shaders there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "io/io_test_util.hpp"
#include "iron/models/runner.hpp"
#include "iron/trace.hpp"
#include "models/published.hpp"
#include "sanitized.hpp"

using namespace iron;
using namespace iron::models;
using iron::io::testing::stories_path;
using iron::test::generate;
using iron::test::kStoriesGreedy;

namespace {

#ifdef IRON_SANITIZED_BUILD
#define IRON_WHOLE_MODEL_ON_VULKAN() GTEST_SKIP() << "sanitizer build: the Release build runs whole models on Vulkan"
#else
#define IRON_WHOLE_MODEL_ON_VULKAN() IRON_NEEDS_VULKAN()
#endif

TEST(VulkanStories260K, GreedyFromBosGivesThePublishedTokens) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  for (int depth : {1, 3}) {
    RunnerOptions o;
    o.device = "vulkan";
    o.depth = depth;
    o.model.context = 256;
    auto runner = LlamaRunner::open(stories_path(), o);
    EXPECT_EQ(generate(*runner, runner->prompt_ids("", false), 60), kStoriesGreedy) << "depth " << depth;
    // The settings are per call, so what the shader cannot draw (top_k 0: every token) cannot
    // be refused at compile time: the runner refuses it before any call.
    const Sampling every_token{0.8, 0, 0.95, 1};
    EXPECT_THROW(runner->generate({1}, 4, [](int32_t) {}, true, 0, nullptr, &every_token), Error);
  }
}

// The cache in 16 bits on the device, as on the CPU: the copy rounds keys and values into it
// as the CPU's does, and attention reads them back; greedy tokens are the CPU's at each type.
TEST(VulkanStories260K, SmallerCachesGiveTheCpusTokens) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  for (DType cache : {f16, bf16}) {
    std::vector<int32_t> tokens[2];
    for (int d = 0; d < 2; ++d) {
      RunnerOptions o;
      o.device = d == 0 ? "cpu" : "vulkan";
      o.model.context = 256;
      o.model.k_cache_dtype = o.model.v_cache_dtype = cache;
      auto runner = LlamaRunner::open(stories_path(), o);
      tokens[d] = generate(*runner, runner->prompt_ids("Once upon a time", false), 80);
    }
    EXPECT_EQ(tokens[1], tokens[0]) << name(cache);
  }
}

// Seeded sampling on the device draws what the CPU draws (f32 probabilities against f64 can
// differ only within rounding of a boundary: VulkanSample counts how often).
TEST(VulkanStories260K, SeededSamplingGivesTheCpusTokens) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  std::vector<int32_t> tokens[2];
  for (int d = 0; d < 2; ++d) {
    RunnerOptions o;
    o.device = d == 0 ? "cpu" : "vulkan";
    o.model.context = 256;
    auto runner = LlamaRunner::open(stories_path(), o);
    const Sampling hot{0.8, 40, 0.95, 42};
    runner->generate(runner->prompt_ids("Once upon a time", false), 100,
                     [&](int32_t id) { tokens[d].push_back(id); }, false, 0, nullptr, &hot);
  }
  ASSERT_EQ(tokens[0].size(), 100u);
  EXPECT_EQ(tokens[1], tokens[0]);
}

TEST(VulkanStories260K, ChunkedPrefillThenDecodeEqualsDecodingTokenByToken) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  iron::test::expect_chunked_prefill_equals_token_by_token(stories_path(), "vulkan");
}

// `iron bench --trace` on each device: one span per step of each run, named by its operator, on
// the pool's threads (CPU) or the device's lane, 63 (Vulkan: the device's own time of each step,
// the decode steps unchained so that each run is timed); the tokens are those of an untraced run.
TEST(VulkanStories260K, ATraceTimesEveryStepOfEveryRun) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  for (const char* device : {"cpu", "vulkan"}) {
    RunnerOptions o;
    o.device = device;
    o.model.context = 64;
    auto runner = LlamaRunner::open(stories_path(), o);
    const std::vector<int32_t> untraced = generate(*runner, {1}, 4);
    trace::start();
    const std::vector<int32_t> traced = generate(*runner, {1}, 4);
    const std::string path = ::testing::TempDir() + "iron_trace_" + std::to_string(::getpid()) + ".json";
    const size_t spans = trace::stop_and_write(path);
    EXPECT_FALSE(trace::on());
    EXPECT_EQ(traced, untraced) << device;
    std::ifstream file(path);
    const nlohmann::json events = nlohmann::json::parse(file)["traceEvents"];
    std::filesystem::remove(path);
    ASSERT_EQ(events.size(), spans) << device;
    std::map<std::string, int> calls;
    for (const auto& e : events) {
      const int lane = e["tid"].get<int>();
      if (std::string(device) == "vulkan")
        EXPECT_EQ(lane, 63) << e.dump();
      else
        EXPECT_LT(lane, 63) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
      EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
      if (lane == 0 || lane == 63) ++calls[e["name"].get<std::string>()];  // thread 0 runs every CPU kernel
    }
    // A prefill and three decode steps each sample once, and each of stories260K's 5 blocks
    // attends once a run.
    EXPECT_EQ(calls["Sample"], 4) << device;
    EXPECT_EQ(calls["Attention"], 4 * 5) << device;
    EXPECT_GT(calls.size(), size_t(4)) << device;
  }
}

}  // namespace
