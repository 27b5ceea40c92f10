// A model's logits against a golden file of an independent float64 reference
// (scripts/reference/make_golden.py: per position the top-32 log-probabilities and the rest's
// mass, and a greedy continuation): top-1 where the reference's margin is clear of what the
// precision may move, KL per position, and greedy generation; the figures printed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "iron/models/runner.hpp"

namespace iron::test {

// KL(p_ref || p_ours) over the reference's top-32 ids plus a "rest" bucket, as the golden file
// defines it.
inline double kl_top32_rest(const nlohmann::json& position, const float* logits, int64_t vocab) {
  double top = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) top = std::max(top, double(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - top);
  double lse = top + std::log(sum), kl = 0, q_top = 0;
  const auto& ids = position["top_ids"];
  const auto& logprobs = position["top_logprobs"];
  for (size_t i = 0; i < ids.size(); ++i) {
    double lp = logprobs[i].get<double>(), lq = double(logits[ids[i].get<int64_t>()]) - lse;
    kl += std::exp(lp) * (lp - lq);
    q_top += std::exp(lq);
  }
  double p_rest = std::exp(position["rest_logprob"].get<double>()), q_rest = std::max(1.0 - q_top, 1e-12);
  if (p_rest > 0) kl += p_rest * (std::log(p_rest) - std::log(q_rest));
  return kl;
}

struct ReferenceCheck {
  std::string model;   // the checkpoint
  std::string golden;  // a file in tests/golden/
  int64_t context = 256;
  Precision precision = Precision::highest;
  double margin_needed = 0.01;  // top-1 is checked where the reference's margin exceeds this
  double kl_bound = 1e-3;       // per position
  std::string device = "cpu";
  std::optional<DType> cache;
  bool each_top1 = true;        // expect top-1 at every clear margin (else count, in the figures)
  bool decoding = false;        // the logits as decode steps make them (score_decoding), not a prefill's
  // How many prompts (the first ones) also continue greedily; each re-prefills its prompt, which
  // on lavapipe costs more than scoring it.
  size_t greedy_prompts = SIZE_MAX;
  // How many prompts (the first ones) are checked at all: lavapipe on an AVX2-only processor
  // takes about 1 s a prefilled token and 1.7 s a decode step (a Zen 3, 2026-12-07).
  size_t prompts = SIZE_MAX;
  size_t skip_prompts = 0;  // ... after leaving out this many (the prompts counted from there)
};

struct ReferenceFigures {
  double kl_mean = 0, kl_max = 0;
  int positions = 0, top1_agree = 0;
  int clear_disagreements = 0;  // top-1 missed where the reference's margin exceeded margin_needed
};

/// Checks every golden position of every prompt (as `check` says) and returns the figures.
inline ReferenceFigures check_against_reference(const ReferenceCheck& check) {
  std::ifstream file(std::string(IRON_SOURCE_DIR) + "/tests/golden/" + check.golden);
  nlohmann::json golden = nlohmann::json::parse(file);
  models::RunnerOptions o;
  o.model.context = check.context;
  o.model.precision = check.precision;
  o.model.k_cache_dtype = o.model.v_cache_dtype = check.cache;
  o.device = check.device;
  auto runner = models::LlamaRunner::open(check.model, o);
  double worst = 0, total = 0;
  int positions = 0, top1_checked = 0, top1_agree = 0, missed = 0;
  size_t greedy_done = 0, prompts_done = 0;
  size_t skipped = 0;
  for (const auto& prompt : golden["prompts"]) {
    if (skipped < check.skip_prompts) {
      ++skipped;
      continue;
    }
    if (prompts_done++ == check.prompts) break;
    std::vector<int32_t> ids = prompt["token_ids"].get<std::vector<int32_t>>();
    Tensor logits = check.decoding ? runner->score_decoding(ids) : runner->score(ids);
    const int64_t vocab = logits.dim(1);
    for (const auto& position : prompt["positions"]) {
      int64_t p = position["pos"].get<int64_t>();
      const float* row = logits.data_as<float>() + p * vocab;
      int64_t top1 = std::max_element(row, row + vocab) - row;
      double margin = position["top_logprobs"][0].get<double>() - position["top_logprobs"][1].get<double>();
      bool agree = top1 == position["top1"].get<int64_t>();
      top1_agree += agree;
      if (margin > check.margin_needed) {
        ++top1_checked;
        missed += !agree;
        if (check.each_top1) {
          EXPECT_TRUE(agree) << prompt["name"] << " position " << p << " (margin " << margin << ")";
        }
      }
      double kl = kl_top32_rest(position, row, vocab);
      worst = std::max(worst, kl);
      total += kl;
      ++positions;
      EXPECT_LT(kl, check.kl_bound) << prompt["name"] << " position " << p;
    }
    // Greedy generation continues as the reference's did, where its margins are clear.
    auto greedy = prompt["greedy_ids"].get<std::vector<int32_t>>();
    auto margins = prompt["greedy_margins"].get<std::vector<double>>();
    std::vector<int32_t> out;
    if (greedy_done++ < check.greedy_prompts && int64_t(ids.size() + greedy.size()) < check.context)
      runner->generate(ids, int64_t(greedy.size()), [&](int32_t id) { out.push_back(id); });
    for (size_t i = 0; check.each_top1 && i < out.size() && i < greedy.size(); ++i) {
      if (margins[i] <= check.margin_needed) break;  // a near tie may go either way; later tokens differ then
      EXPECT_EQ(out[i], greedy[i]) << prompt["name"] << " greedy token " << i;
    }
  }
  std::printf("%s on %s at %s, %s cache%s, vs the numpy reference: %d positions, top-1 agrees at %d (all %d with "
              "a clear margin: %d missed), KL mean %.3g, max %.3g nats\n",
              check.golden.c_str(), check.device.c_str(), std::string(name(check.precision)).c_str(),
              std::string(name(o.model.k_cache_type())).c_str(), check.decoding ? ", decoding" : "", positions, top1_agree, top1_checked, missed,
              total / std::max(positions, 1), worst);
  return {total / std::max(positions, 1), worst, positions, top1_agree, missed};
}

}  // namespace iron::test
