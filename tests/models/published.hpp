// What every device's model tests share: outputs published by sources nobody here wrote
// (../shared/models/SOURCES.md), and greedy generation into a list of ids.
#pragma once

#include <cstdint>
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

}  // namespace iron::test
