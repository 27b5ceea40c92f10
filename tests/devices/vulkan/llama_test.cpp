// Whole models on the Vulkan device (lavapipe in CI), against what the CPU is held to: stories260K's
// published greedy tokens at depth 1 and 3, and chunked prefill then decode equal to decoding
// token by token. The Release build runs them; a sanitizer build skips them (Mesa is not
// instrumented, and the op harness covers the shaders there).
#include <gtest/gtest.h>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "io/io_test_util.hpp"
#include "iron/models/runner.hpp"
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

TEST(VulkanStories260K, ChunkedPrefillThenDecodeEqualsDecodingTokenByToken) {
  IRON_NEEDS_STORIES();
  IRON_WHOLE_MODEL_ON_VULKAN();
  iron::test::expect_chunked_prefill_equals_token_by_token(stories_path(), "vulkan");
}

}  // namespace
