// The Llama model as IRON graphs, against sources nobody here wrote: stories260K's published
// greedy tokens (llama2.c / llama.cpp, ../shared/models/SOURCES.md) and SmolLM2's logits from an
// independent numpy forward pass (scripts/reference/, the gguf package's dequantisation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "models/published.hpp"
#include "models/reference_check.hpp"
#include "devices/vulkan/vulkan_test_util.hpp"
#include "sanitized.hpp"
#include "iron/io/gguf.hpp"
#include "iron/models/runner.hpp"

using namespace iron;
using namespace iron::models;
using iron::io::testing::local_model_path;
using iron::io::testing::stories_path;

namespace {

using iron::test::generate;
using iron::test::kStoriesGreedy;

TEST(Stories260K, GreedyFromBosGivesThePublishedTokens) {
  IRON_NEEDS_STORIES();
  for (int threads : {1, 2})
    for (int depth : {1, 3}) {
      RunnerOptions o;
      o.threads = threads;
      o.depth = depth;
      o.model.context = 256;
      auto runner = LlamaRunner::open(stories_path(), o);
      EXPECT_EQ(generate(*runner, runner->prompt_ids("", false), 60), kStoriesGreedy)
          << "threads " << threads << ", depth " << depth;
    }
}

TEST(Stories260K, ZooContinuesAsPublished) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 256;
  auto runner = LlamaRunner::open(stories_path(), o);
  std::vector<int32_t> prompt = runner->prompt_ids("Zoo", false);
  EXPECT_EQ(prompt, (std::vector<int32_t>{1, 410, 469, 347}));
  std::string text = "Zoo";
  text::StreamDecoder stream(runner->tokenizer());
  for (int32_t id : generate(*runner, prompt, 60)) text += stream.push(id);
  const std::string published =
      "Zoo was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red "
      "ball. She wanted to play with it, but she didn't want to play with";
  EXPECT_EQ(text.substr(0, published.size()), published);
}

TEST(Stories260K, ChunkedPrefillThenDecodeEqualsDecodingTokenByToken) {
  IRON_NEEDS_STORIES();
  iron::test::expect_chunked_prefill_equals_token_by_token(stories_path(), "cpu");
}

// A run that continues after what the cache already holds (generate's `start`, as a chat's next
// turn or `iron bench -d` does) gives what one run over the whole prompt gives; a start past the
// context is refused.
TEST(Stories260K, ContinuingAfterTheCacheEqualsOneRun) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 128;
  o.model.chunk = 8;
  auto runner = LlamaRunner::open(stories_path(), o);
  const std::vector<int32_t> prompt(kStoriesGreedy.begin(), kStoriesGreedy.begin() + 21);
  const std::vector<int32_t> whole = generate(*runner, prompt, 30);
  for (int64_t split : {1, 8, 13, 20}) {
    runner->generate(std::vector<int32_t>(prompt.begin(), prompt.begin() + split), 0, [](int32_t) {}, false);
    std::vector<int32_t> out;
    runner->generate(std::vector<int32_t>(prompt.begin() + split, prompt.end()), 30,
                     [&](int32_t id) { out.push_back(id); }, false, split);
    EXPECT_EQ(out, whole) << "split at " << split;
  }
  EXPECT_THROW(runner->generate({1}, 1, [](int32_t) {}, false, 128), Error);
  EXPECT_THROW(runner->generate(prompt, 1, [](int32_t) {}, false, 110), Error);  // no room for the prompt
}

TEST(Stories260K, SameSeedSameSamples) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 256;
  o.model.sampling = {0.9, 40, 0.95, 1234};
  auto a = LlamaRunner::open(stories_path(), o), b = LlamaRunner::open(stories_path(), o);
  auto first = generate(*a, {1}, 50), second = generate(*b, {1}, 50);
  EXPECT_EQ(first, second);
  o.model.sampling.seed = 99;
  auto c = LlamaRunner::open(stories_path(), o);
  EXPECT_NE(generate(*c, {1}, 50), first);  // another seed, another story
}

// Sampling settings are per call (a server's requests each bring theirs): one runner, compiled
// once, gives for each setting what a runner opened with it gives, in any order.
TEST(Stories260K, SamplingSettingsArePerCall) {
  IRON_NEEDS_STORIES();
  const std::vector<Sampling> settings{{0.9, 40, 0.95, 1234}, {0.0, 40, 0.95, 5}, {1.3, 0, 0.6, ~uint64_t(0)},
                                       {0.7, 3, 1.0, 42}};
  RunnerOptions o;
  o.model.context = 256;
  auto shared = LlamaRunner::open(stories_path(), o);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < settings.size(); ++i) {
      const Sampling& s = settings[round ? settings.size() - 1 - i : i];
      RunnerOptions own = o;
      own.model.sampling = s;
      std::vector<int32_t> got;
      shared->generate({1}, 40, [&](int32_t id) { got.push_back(id); }, false, 0, nullptr, &s);
      EXPECT_EQ(got, generate(*LlamaRunner::open(stories_path(), own), {1}, 40))
          << "temperature " << s.temperature << " seed " << s.seed << " round " << round;
    }
  const Sampling bad{-1, 40, 0.95, 0}, bad_p{0.5, 40, 0, 0};
  EXPECT_THROW(shared->generate({1}, 4, [](int32_t) {}, false, 0, nullptr, &bad), Error);
  EXPECT_THROW(shared->generate({1}, 4, [](int32_t) {}, false, 0, nullptr, &bad_p), Error);
  EXPECT_EQ(generate(*shared, {1}, 60), kStoriesGreedy);  // the options' settings: greedy
}

// Issue 17: the seed is the sampler's param, mixed with a per-call counter, so any 64-bit seed
// samples any number of tokens (a seed near 2^30 used to fail, at the first call or mid-way);
// greedy never reads it.
TEST(Stories260K, AnySeedSamplesEveryToken) {
  IRON_NEEDS_STORIES();
  for (uint64_t seed : {uint64_t(1073741822), uint64_t(1073741823), uint64_t(4294967295), ~uint64_t(0)}) {
    RunnerOptions o;
    o.model.context = 256;
    o.model.sampling = {0.9, 40, 0.95, seed};
    auto runner = LlamaRunner::open(stories_path(), o);
    std::vector<int32_t> out;
    runner->generate({1}, 200, [&](int32_t id) { out.push_back(id); }, false);
    EXPECT_EQ(out.size(), 200u) << "seed " << seed;
  }
  RunnerOptions greedy;
  greedy.model.context = 256;
  greedy.model.sampling = {0.0, 40, 0.95, ~uint64_t(0)};
  EXPECT_EQ(generate(*LlamaRunner::open(stories_path(), greedy), {1}, 60), kStoriesGreedy);
}

TEST(Stories260K, TheBatchIsHeldToTheContext) {
  IRON_NEEDS_STORIES();
  RunnerOptions capped, asked;
  capped.model.context = asked.model.context = 64;
  capped.model.chunk = 64;
  asked.model.chunk = 1 << 20;  // 2^20 rows of cache per layer, were it not held to the context
  auto a = LlamaRunner::open(stories_path(), capped), b = LlamaRunner::open(stories_path(), asked);
  EXPECT_EQ(b->state_bytes(), a->state_bytes());
  EXPECT_EQ(generate(*b, {1}, 20), std::vector<int32_t>(kStoriesGreedy.begin(), kStoriesGreedy.begin() + 20));
}

TEST(LlamaRunner, ContextBytesCountCacheAndTables) {
  LlamaConfig c;
  c.layers = 30, c.kv_heads = 3, c.head_dim = 64;  // SmolLM2-135M
  LlamaOptions o;
  o.context = 2048, o.chunk = 100000;  // -b 100000 before the batch was held to the context
  const int64_t rows = 102048;
  EXPECT_EQ(LlamaRunner::context_bytes(c, o), 30 * 2 * rows * 3 * 64 * 4 + rows * 64 * 4);
  EXPECT_GT(LlamaRunner::context_bytes(c, o), int64_t(1) << 30);  // open() says so before allocating
  o.context = o.chunk = INT64_MAX;  // no overflow
  EXPECT_EQ(LlamaRunner::context_bytes(c, o), INT64_MAX);
}

TEST(Stories260K, AFullContextIsReported) {
  IRON_NEEDS_STORIES();
  RunnerOptions o;
  o.model.context = 16;
  auto runner = LlamaRunner::open(stories_path(), o);
  // Asked for more tokens than fit, or for -1 (until the end of sequence or a full context).
  for (int64_t asked : {int64_t(100), int64_t(-1)}) {
    std::vector<int32_t> out;
    auto stats = runner->generate({1}, asked, [&](int32_t id) { out.push_back(id); });
    EXPECT_EQ(stats.stop, "context full") << "asked for " << asked;
    EXPECT_EQ(out, std::vector<int32_t>(kStoriesGreedy.begin(), kStoriesGreedy.begin() + 15)) << "asked for " << asked;
  }
  std::vector<int32_t> long_prompt(16, 1);
  try {
    runner->generate(long_prompt, 1, [](int32_t) {});
    ADD_FAILURE() << "a prompt longer than the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the context holds 16"), std::string::npos) << e.what();
  }
}

// SmolLM2 against its golden logits at `precision`, with a cache type when given; the KL mean.
double check_smollm2_against_reference(Precision precision, double margin_needed, double kl_bound,
                                       const std::string& device = "cpu", std::optional<DType> cache = {},
                                       size_t greedy_prompts = SIZE_MAX, size_t prompts = SIZE_MAX,
                                       size_t skip_prompts = 0) {
  iron::test::ReferenceCheck check;
  check.model = local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
  check.golden = "smollm2_logits.json";
  check.precision = precision;
  check.margin_needed = margin_needed;
  check.kl_bound = kl_bound;
  check.device = device;
  check.cache = cache;
  check.greedy_prompts = greedy_prompts;
  check.prompts = prompts;
  check.skip_prompts = skip_prompts;
  return iron::test::check_against_reference(check).kl_mean;
}

#define IRON_NEEDS_SMOLLM2()                                                                     \
  if (!std::filesystem::exists(local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf")))             \
  GTEST_SKIP() << local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf") << " is absent: run scripts/fetch-model.sh"

TEST(SmolLM2, LogitsMatchAnIndependentNumpyReference) {
  IRON_NEEDS_SMOLLM2();
  check_smollm2_against_reference(Precision::highest, 0.01, 1e-3);
}

// The same thresholds on the Vulkan device (lavapipe in CI; the Release build only): the plain
// English prompt scored (19 positions; the CPU's test above scores all four prompts, 130) and
// continued greedily (its 8 decode steps). lavapipe runs the same shaders for every prompt, and
// it is slow: on an AVX2-only Zen 3 about 0.5 s a prefilled token and 1.3 s a decode step, 96% of
// it in the matmul shader (`iron bench --device vulkan --trace`), where every prompt and the
// greedy one took 332 s alone on 2 cores, and the first two prompts with the first's greedy
// tokens (93 prefilled tokens) 117-143 s (2026-12-07); this 52 s, and 23 s once the matmul's
// lanes shared a's elements (0.3 s a prefilled token, 0.7 s a step).
TEST(VulkanSmolLM2, LogitsMatchAnIndependentNumpyReference) {
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer build: the Release build runs whole models on Vulkan";
#endif
  IRON_NEEDS_VULKAN();
  IRON_NEEDS_SMOLLM2();
  check_smollm2_against_reference(Precision::highest, 0.01, 1e-3, "vulkan", {}, /*greedy_prompts=*/1, /*prompts=*/1,
                                  /*skip_prompts=*/1);
}

TEST(SmolLM2, LogitsAtMediumPrecisionStayCloseToTheReference) {
  // MEDIUM rounds each activation row to int8 blocks, as llama.cpp's quantised dot products do.
  // llama.cpp itself on the same file and positions (bench/accuracy_llama_cpp.py) agrees on
  // top-1 at 127 of 130 with KL mean 3.5e-3, max 2.2e-2 nats; MEDIUM measures 127, 3.1e-3 and
  // 3.0e-2 (2.3e-2 before the grouped attention tiles summed in another order: one position's
  // int8 roundings tip). The bounds leave room for that error, not for a broken kernel (KL of
  // 0.1 and more). An f32 cache: the matmuls' rounding alone (the cache types are the next test's).
  IRON_NEEDS_SMOLLM2();
  check_smollm2_against_reference(Precision::medium, 0.3, 4e-2, "cpu", f32);
}

// What a cache type's own rounding may add at medium to the KL mean (nats, over SmolLM2's 130
// golden positions) of the f32 cache, and the most any cache may reach in all. Absolute, so they
// mean the same on every CPU: the f32 cache's own figure is medium's matmul rounding, which moves
// with the processor (3.1e-3 where int8 products run, 8.5e-8 on AVX2 where medium keeps f32), and
// a bound relative to it held nothing on AVX2 while failing there on f16's 8e-7. Each allowance
// grows with the square of the type's rounding unit (KL is half the logits' error variance),
// from f16's (2^-11 of each element) to bf16's (2^-8) and q8_0's (2^-8 of its block's largest, so
// more for the smaller elements), with room for the int8 roundings a changed cache value tips on
// the way, which is most of the increments measured where int8 runs. Measured increments, prefill
// at medium (Xeon: AVX-512 int8 products; EPYC Zen 3: AVX2, f32 products): f16 4.6e-4 and 7e-7,
// bf16 5.3e-4 and 4.2e-5, q8_0 2.7e-3 and 7.7e-4.
double cache_allowance(DType cache) {
  switch (cache) {
    case DType::f16: return 1e-3;
    case DType::bf16: return 2e-3;
    case DType::q8_0: return 5e-3;
    default: return 0;
  }
}
constexpr double kMediumKlCeiling = 1e-2;  // f32 3.1e-3 and q8_0 5.7e-3 where int8 runs

// SmolLM2 at medium, for each cache type in `types`, against the float64 reference, its prompts
// scored by one prefill or (decoding) by decode steps: each type's KL mean within the f32 cache's
// plus the type's allowance and under the ceiling; top-1 counted (at least 120 of 130 agree)
// rather than required. Prints the figures (the CPU path says which products ran).
void expect_caches_close_at_medium(bool decoding, std::initializer_list<DType> types) {
  auto figures = [&](DType cache) {
    iron::test::ReferenceCheck check;
    check.model = local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    check.golden = "smollm2_logits.json";
    check.precision = Precision::medium;
    check.margin_needed = 0.3;
    check.kl_bound = 0.25;
    check.each_top1 = false;
    check.cache = cache;
    check.decoding = decoding;
    const iron::test::ReferenceFigures f = iron::test::check_against_reference(check);
    std::cout << "[ figures  ] " << (decoding ? "decoding" : "prefill") << ", cache " << name(cache)
              << ": KL mean " << f.kl_mean << ", max " << f.kl_max << ", top-1 " << f.top1_agree << "/"
              << f.positions << "\n";
    return f;
  };
  const double f32_cache = figures(f32).kl_mean;
  EXPECT_LE(f32_cache, kMediumKlCeiling);
  for (DType t : types) {
    const iron::test::ReferenceFigures f = figures(t);
    EXPECT_LE(f.kl_mean, f32_cache + cache_allowance(t)) << name(t) << " adds more than its rounding allows";
    EXPECT_LE(f.kl_mean, kMediumKlCeiling) << name(t);
    EXPECT_GE(f.top1_agree, 120) << name(t);
  }
}

// Each smaller cache type at medium, against the f32 cache at medium. Measured where int8 runs:
// f32 3.06e-3 mean (max 3.0e-2), f16 3.52e-3 (2.9e-2), bf16 3.59e-3 (2.7e-2), q8_0 5.71e-3
// (0.18). At medium a cache's rounding meets the activations' int8 rounding, and a position whose
// blocks round the other way moves most (q8_0's worst position was 0.04 with the per-head kernel's
// summation order): the per-position bound is loose, the means carry the comparison, and top-1 is
// counted rather than required.
TEST(SmolLM2, SmallerCachesAtMediumStayCloseToTheReference) {
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer build: the Release build compares whole models' logits";
#endif
  IRON_NEEDS_SMOLLM2();
  expect_caches_close_at_medium(false, {f16, bf16, DType::q8_0});
}

// The same at medium through decode steps (LlamaRunner::score_decoding: each token fed to a
// decode step, whose attention reads the cache as generation does; a prefill's reads the
// chunk's own rows), so the decode tiles at medium (the int8 scores over a q8_0 cache) are held
// to the float64 reference too, not only the prefill's. The same allowances as above.
TEST(SmolLM2, DecodingAtMediumStaysCloseToTheReference) {
#ifdef IRON_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer build: the Release build compares whole models' logits";
#endif
  IRON_NEEDS_SMOLLM2();
  expect_caches_close_at_medium(true, {f16, DType::q8_0});
}

}  // namespace

namespace {

// stories260K rewritten as a Hugging Face checkpoint (safetensors, HF names, config.json), its
// query and key rows put back in the order Hugging Face keeps them (pairs (i, i + d/2) rather
// than (2i, 2i + 1)): with RoPE over halves it must generate exactly the same tokens.
TEST(Stories260K, AsAHuggingFaceCheckpointGeneratesTheSameTokens) {
  IRON_NEEDS_STORIES();
  io::GgufFile gguf = io::GgufFile::open(stories_path());
  LlamaConfig c = llama_config_from_gguf(gguf);
  auto hf_name = [](const std::string& name) -> std::string {
    if (name == "token_embd.weight") return "model.embed_tokens.weight";
    if (name == "output_norm.weight") return "model.norm.weight";
    if (name == "output.weight") return "lm_head.weight";
    static const std::vector<std::pair<std::string, std::string>> parts = {
        {"attn_q.weight", "self_attn.q_proj.weight"},      {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},      {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_norm.weight", "input_layernorm.weight"},    {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},           {"ffn_down.weight", "mlp.down_proj.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"}};
    size_t dot = name.find('.', 4);
    std::string layer = name.substr(4, dot - 4), rest = name.substr(dot + 1);
    for (const auto& [g, h] : parts)
      if (rest == g) return "model.layers." + layer + "." + h;
    return name;
  };
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const auto& info : gguf.tensors()) {
    Tensor t = gguf.tensor(info.name);
    std::vector<float> v = t.to_floats();
    bool q = info.name.find("attn_q") != std::string::npos, k = info.name.find("attn_k") != std::string::npos;
    if (q || k) {  // per head, HF row j * d/2 + i is GGUF row 2i + j
      const int64_t d = c.head_dim, cols = t.dim(1), heads = t.dim(0) / d;
      std::vector<float> hf(v.size());
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < d / 2; ++i)
          for (int64_t j = 0; j < 2; ++j)
            std::copy_n(&v[size_t((h * d + 2 * i + j) * cols)], cols, &hf[size_t((h * d + j * d / 2 + i) * cols)]);
      v = hf;
    }
    size_t begin = data.size();
    data.resize(begin + v.size() * 4);
    std::memcpy(data.data() + begin, v.data(), v.size() * 4);
    header[hf_name(info.name)] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {begin, data.size()}}};
  }
  auto dir = std::filesystem::temp_directory_path() / ("iron_hf_stories_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bytes = iron::io::testing::safetensors_bytes(header.dump(), data);
  std::ofstream((dir / "model.safetensors").string(), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  nlohmann::json config = {{"model_type", "llama"},       {"num_hidden_layers", c.layers},
                           {"hidden_size", c.dim},         {"num_attention_heads", c.heads},
                           {"num_key_value_heads", c.kv_heads}, {"intermediate_size", c.ffn},
                           {"vocab_size", c.vocab},        {"max_position_embeddings", 512},
                           {"rms_norm_eps", c.rms_eps},    {"rope_theta", c.rope_base},
                           {"tie_word_embeddings", false}};
  std::ofstream((dir / "config.json").string()) << config.dump();
  RunnerOptions o;
  o.model.context = 128;
  auto runner = LlamaRunner::open(dir.string(), o);
  EXPECT_EQ(runner->config().rope_mode, "halves");
  EXPECT_FALSE(runner->has_tokenizer());
  EXPECT_EQ(generate(*runner, {1}, 60), kStoriesGreedy);
  std::filesystem::remove_all(dir);
}

}  // namespace
