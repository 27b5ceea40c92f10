// Determinism: the same prompt gives bitwise identical logits on every run (the same runner twice,
// and a fresh runner), at 1 and 2 threads, and 1 and 2 threads agree bitwise too: every kernel
// computes each output element on one thread in an order the split does not change, which is
// what lets the pool run a call on fewer threads while another process holds a core.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/io_test_util.hpp"
#include "iron/models/runner.hpp"
#include "sanitized.hpp"

using namespace iron;
using namespace iron::models;
using iron::io::testing::local_model_path;
using iron::io::testing::stories_path;

// Sanitizer builds skip the SmolLM2 case (sanitized.hpp): it checks arithmetic the Release build
// already checks, the stories260K case covers the same code under the sanitizer, and SmolLM2's
// forward passes take minutes there.

namespace {

/// A prompt longer than one prefill chunk (64 rows), so chunking is part of what is checked.
const char* const kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
    "with "
    "her friends. One day, she saw a big red ball under a tree. She ran to get it, but a dog got "
    "there "
    "first. The dog was happy and wagged its tail. Lily laughed and said, \"Let's play together!\"";

std::unique_ptr<LlamaRunner> open(const std::string& path, int threads) {
  RunnerOptions o;
  o.threads = threads;
  o.model.context = 256;
  return LlamaRunner::open(path, o);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), size_t(a.nbytes())) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    worst = std::max(worst, double(std::fabs(x[i] - y[i])));
  return worst;
}

/// `repeats` copies of the prompt: more than 64 tokens either way (stories260K's 512-token
/// vocabulary spells it in more tokens than SmolLM2's, whose forward pass costs far more).
void check_model(const std::string& name, const std::string& path, int repeats) {
  std::vector<Tensor> by_threads;
  std::vector<int32_t> ids;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(name + " at " + std::to_string(threads) + " threads");
    auto runner = open(path, threads);
    if (ids.empty()) {
      std::string prompt = kPrompt;
      for (int i = 1; i < repeats; ++i) prompt += std::string(" ") + kPrompt;
      ids = runner->prompt_ids(prompt, false);
    }
    ASSERT_GT(ids.size(), 64u) << "the prompt should span two prefill chunks";
    const Tensor first = runner->score(ids).clone();
    const Tensor second = runner->score(ids).clone();
    EXPECT_TRUE(same_bytes(first, second))
        << "the same runner scored the prompt differently, max |diff| "
        << max_abs_diff(first, second);
    const Tensor fresh = open(path, threads)->score(ids).clone();
    EXPECT_TRUE(same_bytes(first, fresh))
        << "a fresh runner scored the prompt differently, max |diff| "
        << max_abs_diff(first, fresh);
    by_threads.push_back(first);
  }
  ASSERT_EQ(by_threads.size(), 2u);
  const bool identical = same_bytes(by_threads[0], by_threads[1]);
  EXPECT_TRUE(identical) << name << ": 1 and 2 threads differ, max |diff| " << max_abs_diff(by_threads[0], by_threads[1]);
  std::printf("%s: 1-thread and 2-thread logits (%zu tokens) are %s (max |diff| %.3g)\n",
              name.c_str(), ids.size(), identical ? "bitwise identical" : "NOT bitwise identical",
              max_abs_diff(by_threads[0], by_threads[1]));
  ::testing::Test::RecordProperty("threads_1_vs_2_bitwise_identical", identical ? "yes" : "no");
}

TEST(Determinism, Stories260KLogitsAreBitwiseRepeatableAtAFixedThreadCount) {
  IRON_NEEDS_STORIES();
  check_model("stories260K", stories_path(), 2);
}

TEST(Determinism, SmolLM2LogitsAreBitwiseRepeatableAtAFixedThreadCount) {
  const std::string path = local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent: run scripts/fetch-model.sh";
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer build: the Release build runs this case";
#endif
  check_model("SmolLM2", path, 1);
}

}  // namespace
