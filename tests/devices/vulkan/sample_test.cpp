// Sampling at a temperature on the Vulkan device: the shader draws as the CPU's kernel does
// (the same top_k order, top_p cut and ops::sample_uniform draw) but with f32 probabilities, so
// a draw that lands within rounding of a boundary between two tokens may take the other one.
// This test counts how often over a vocabulary's worth of logits, and prints the rate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "iron/iron.hpp"
#include "sanitized.hpp"

namespace F = iron::functional;

namespace {

struct Draw : iron::Graph {
  iron::Input logits = input("logits"), settings = input("settings");
  iron::Scratchpad step = scratchpad("step"), position = scratchpad("position");
  Draw() : iron::Graph("draw") {}
  iron::Outputs body() override { return {F::sample(logits, settings, step, position)}; }
};

TEST(VulkanSample, DrawsAsTheCpuBeyondRounding) {
  IRON_NEEDS_VULKAN();
  // SmolLM2's vocabulary, logits spread as a language model's are (a few likely tokens, a long
  // tail), new ones every few draws.
  const int64_t vocab = 49152;
#if IRON_SANITIZED_BUILD
  const int draws = 40;
#else
  const int draws = 600;
#endif
  Draw on_gpu, on_cpu;
  const iron::Shapes shapes{{"logits", iron::InputSpec({vocab})}, {"settings", iron::InputSpec({F::kSampleSettingsWords}, iron::i32)}};
  auto& gpu = on_gpu.compile(shapes, {.device = "vulkan"});
  auto& cpu = on_cpu.compile(shapes, {.device = "cpu"});
  struct Setting {
    double temperature;
    int64_t top_k;
    double top_p;
  };
  const Setting settings[] = {{0.8, 40, 0.95}, {1.0, 256, 1.0}, {0.3, 8, 0.5}, {1.5, 100, 0.9}};
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  int differ = 0, sampled_runs = 0;
  for (int d = 0; d < draws; ++d) {
    if (d % 10 == 0)
      for (float& v : logits) v = normal(random);
    const Setting& st = settings[d % 4];
    const iron::Tensor x = iron::Tensor::from(logits, {vocab});
    const iron::Tensor s = F::sample_settings(st.temperature, st.top_k, st.top_p, uint64_t(d) * 0x9E3779B97F4A7C15ull);
    const iron::Tensor inputs[] = {x, s};
    const iron::ValueArg values[] = {{"step", d % 97}, {"position", d}};
    const int32_t want = cpu(inputs, values).outputs[0].data_as<int32_t>()[0];
    const int32_t got = gpu(inputs, values).outputs[0].data_as<int32_t>()[0];
    ASSERT_GE(got, 0) << "draw " << d;
    ASSERT_LT(got, vocab) << "draw " << d;
    differ += got != want;
    ++sampled_runs;
  }
  std::printf("Vulkan and CPU draws differ at %d of %d (f32 against f64 probabilities)\n", differ, sampled_runs);
  // A straddle needs the draw within ~1e-6 of a boundary: a handful at most in these draws.
  EXPECT_LE(differ, sampled_runs / 100);
  // Greedy draws agree exactly.
  const iron::Tensor greedy = F::sample_settings(0, 40, 0.95, 1);
  const iron::Tensor x = iron::Tensor::from(logits, {vocab});
  EXPECT_EQ(gpu({x, greedy}, {{"step", 0}, {"position", 0}}).outputs[0].data_as<int32_t>()[0],
            cpu({x, greedy}, {{"step", 0}, {"position", 0}}).outputs[0].data_as<int32_t>()[0]);
}

}  // namespace
