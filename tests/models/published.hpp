// What every device's model tests share: outputs published by sources nobody here wrote
// (../shared/models/SOURCES.md), greedy generation into a list of ids, and the checks each
// device's model tests run alike.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "iron/models/runner.hpp"

namespace iron::test {

/// stories260K's greedy tokens from BOS (llama2.c, llama.cpp).
inline const std::vector<int32_t> kStoriesGreedy = {
    403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
    410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352,
    266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415};

/// The ids `r` generates after `prompt`, at most `n`.
inline std::vector<int32_t> generate(models::LlamaRunner& r, const std::vector<int32_t>& prompt, int64_t n) {
  std::vector<int32_t> out;
  r.generate(prompt, n, [&](int32_t id) { out.push_back(id); });
  return out;
}

/// A prompt of 23 tokens (BOS and stories260K's first 22 greedy ids) through chunks of 5 rows, and
/// the same prompt through chunks of one row, on `device`: the continuations must be identical,
/// and both continue the published greedy sequence.
inline void expect_chunked_prefill_equals_token_by_token(const std::string& stories, const std::string& device) {
  std::vector<int32_t> prompt{1};
  prompt.insert(prompt.end(), kStoriesGreedy.begin(), kStoriesGreedy.begin() + 22);
  models::RunnerOptions chunked, single;
  chunked.device = single.device = device;
  chunked.model.context = single.model.context = 128;
  chunked.model.chunk = 5;
  single.model.chunk = 1;
  auto a = models::LlamaRunner::open(stories, chunked), b = models::LlamaRunner::open(stories, single);
  auto ta = generate(*a, prompt, 30), tb = generate(*b, prompt, 30);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(ta, std::vector<int32_t>(kStoriesGreedy.begin() + 22, kStoriesGreedy.begin() + 52));
}

}  // namespace iron::test
