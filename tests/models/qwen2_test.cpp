// Qwen2 / Qwen2.5: its configuration from GGUF metadata and config.json, its chat prompt, the
// graph end to end on a tiny synthetic checkpoint, and Qwen2.5-Coder-0.5B against a float64
// numpy reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "io/io_test_util.hpp"
#include "models/reference_check.hpp"
#include "sanitized.hpp"
#include "text/unicode.hpp"
#include "iron/error.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/io/gguf.hpp"
#include "iron/models/runner.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron {
namespace {

using models::LlamaRunner;
using models::RunnerOptions;
using io::testing::GgufWriter;
namespace testing = io::testing;

// Qwen2.5's template without its tools branch: the default system message when the first
// message is not a system one.
const char* const kTinyTemplate =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Tiny.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if (message.role == \"user\") or (message.role == \"system\" and not "
    "loop.first) or (message.role == \"assistant\") %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' "
    "}}{%- endif %}";

// A two-layer Qwen2 of random f32 weights (dim 64, 4 heads over 2 kv heads of 16, ffn 96) with q,
// k and v biases and a separate output weight; a byte-level vocabulary of the 256 byte tokens, a
// few merges and the ChatML markers.
struct TinyQwen2 {
  static constexpr uint64_t dim = 64, heads = 4, kv = 2, hd = 16, ffn = 96, layers = 2;
  std::vector<std::string> pieces, merges;
  std::vector<int32_t> types;
  // GGUF name -> (dims in ggml order, values)
  std::vector<std::pair<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>> tensors;
  uint64_t kv_written = kv;  // what the metadata says
  bool write_eps = true;

  explicit TinyQwen2(float bias_scale = 1.0f) {
    for (int b = 0; b < 256; ++b) {
      std::string piece;
      text::detail::append_utf8(piece, text::detail::byte_to_unicode(uint8_t(b)));
      pieces.push_back(piece);
      types.push_back(1);
    }
    for (const char* m : {"H i", "u s", "us e", "use r", "a s"}) {
      merges.push_back(m);
      std::string joined = m;
      joined.erase(joined.find(' '), 1);
      pieces.push_back(joined);
      types.push_back(1);
    }
    for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
      pieces.push_back(special);
      types.push_back(3);
    }
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 0.2f);
    auto add = [&](const std::string& name, std::vector<uint64_t> dims, float around = 0, float scale = 1) {
      uint64_t n = 1;
      for (uint64_t d : dims) n *= d;
      std::vector<float> values(n);
      for (float& v : values) v = around + scale * normal(rng);
      tensors.push_back({name, {dims, values}});
    };
    const uint64_t vocab = pieces.size();
    add("token_embd.weight", {dim, vocab});
    add("output_norm.weight", {dim}, 1.0f);
    add("output.weight", {dim, vocab});
    for (uint64_t l = 0; l < layers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      add(b + "attn_norm.weight", {dim}, 1.0f);
      add(b + "ffn_norm.weight", {dim}, 1.0f);
      add(b + "attn_q.weight", {dim, heads * hd});
      add(b + "attn_k.weight", {dim, kv * hd});
      add(b + "attn_v.weight", {dim, kv * hd});
      // Biases as large as Qwen's: its k biases reach tens.
      add(b + "attn_q.bias", {heads * hd}, 0.0f, 5 * bias_scale);
      add(b + "attn_k.bias", {kv * hd}, 0.0f, 5 * bias_scale);
      add(b + "attn_v.bias", {kv * hd}, 0.0f, 5 * bias_scale);
      add(b + "attn_output.weight", {heads * hd, dim});
      add(b + "ffn_gate.weight", {dim, ffn});
      add(b + "ffn_up.weight", {dim, ffn});
      add(b + "ffn_down.weight", {ffn, dim});
    }
  }

  /// As a GGUF file; `skip` names a tensor left out.
  std::string gguf(const std::string& name, const std::string& skip = "") const {
    GgufWriter w;
    w.kv_string("general.architecture", "qwen2");
    auto put = [&](const std::string& key, uint64_t value) { w.kv<uint32_t>("qwen2." + key, 4, uint32_t(value)); };
    put("block_count", layers);
    put("embedding_length", dim);
    put("attention.head_count", heads);
    put("attention.head_count_kv", kv_written);
    put("feed_forward_length", ffn);
    put("context_length", 1024);
    w.kv<float>("qwen2.rope.freq_base", 6, 1e6f);
    if (write_eps) w.kv<float>("qwen2.attention.layer_norm_rms_epsilon", 6, 1e-5f);
    w.kv_string("tokenizer.ggml.model", "gpt2");
    w.kv_string("tokenizer.ggml.pre", "qwen2");
    w.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array(pieces));
    w.raw_kv("tokenizer.ggml.token_type", 9, GgufWriter::array<int32_t>(5, types));
    w.raw_kv("tokenizer.ggml.merges", 9, GgufWriter::string_array(merges));
    w.kv<uint32_t>("tokenizer.ggml.bos_token_id", 4, 261);
    w.kv<uint32_t>("tokenizer.ggml.eos_token_id", 4, 263);
    w.kv<uint8_t>("tokenizer.ggml.add_bos_token", 7, 0);
    w.kv_string("tokenizer.chat_template", kTinyTemplate);
    for (const auto& [tensor_name, t] : tensors)
      if (tensor_name != skip) w.tensor(tensor_name, t.first, 0, testing::as_bytes(t.second));
    return testing::write_temp_file("tiny_qwen2_" + name + ".gguf", w.build());
  }

  /// As a Hugging Face directory (config.json, model.safetensors; no tokenizer): Hugging Face's
  /// names and row-major shapes.
  std::string hf(const std::filesystem::path& dir) const {
    static const std::map<std::string, std::string> names = {
        {"attn_q.weight", "self_attn.q_proj.weight"}, {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"}, {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},     {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},     {"attn_norm.weight", "input_layernorm.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},      {"ffn_down.weight", "mlp.down_proj.weight"}};
    nlohmann::json header = nlohmann::json::object();
    std::vector<uint8_t> data;
    for (const auto& [name, t] : tensors) {
      std::string hf_name = name == "token_embd.weight"    ? "model.embed_tokens.weight"
                            : name == "output_norm.weight" ? "model.norm.weight"
                            : name == "output.weight"      ? "lm_head.weight"
                                                           : "";
      if (hf_name.empty()) {
        const size_t dot = name.find('.', 4);
        hf_name = "model.layers." + name.substr(4, dot - 4) + "." + names.at(name.substr(dot + 1));
      }
      std::vector<int64_t> shape(t.first.rbegin(), t.first.rend());
      const size_t begin = data.size();
      const auto bytes = testing::as_bytes(t.second);
      data.insert(data.end(), bytes.begin(), bytes.end());
      header[hf_name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
    }
    std::filesystem::create_directories(dir);
    const auto bytes = testing::safetensors_bytes(header.dump(), data);
    std::ofstream((dir / "model.safetensors").string(), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    const nlohmann::json config = {{"model_type", "qwen2"},
                                   {"num_hidden_layers", layers},
                                   {"hidden_size", dim},
                                   {"num_attention_heads", heads},
                                   {"num_key_value_heads", kv},
                                   {"intermediate_size", ffn},
                                   {"vocab_size", pieces.size()},
                                   {"max_position_embeddings", 1024},
                                   {"rms_norm_eps", 1e-5},  // as the GGUF's
                                   {"rope_theta", 1e6},
                                   {"hidden_act", "silu"},
                                   {"use_sliding_window", false},
                                   {"sliding_window", 4096},
                                   {"tie_word_embeddings", false},
                                   {"rope_scaling", nullptr}};
    std::ofstream((dir / "config.json").string()) << config.dump();
    return dir.string();
  }
};

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Qwen2Config, FromMetadata) {
  const std::string path = TinyQwen2().gguf("config");
  const models::LlamaConfig c = models::llama_config_from_gguf(io::GgufFile::open(path));
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.rope_mode, "halves");  // llama.cpp runs qwen2 in NEOX mode; its rows are not permuted
  EXPECT_EQ(c.rope_base, 1e6);
  EXPECT_FLOAT_EQ(float(c.rms_eps), 1e-5f);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_FALSE(c.tied_embeddings);  // the file has output.weight
  EXPECT_EQ(c.vocab, 264);
  // Without the epsilon key: Qwen2's published 1e-6, not Llama's 1e-5.
  TinyQwen2 no_eps;
  no_eps.write_eps = false;
  EXPECT_EQ(models::llama_config_from_gguf(io::GgufFile::open(no_eps.gguf("no_eps"))).rms_eps,
            models::kQwen2DefaultRmsEps);
}

TEST(Qwen2Config, BadMetadataIsAClearError) {
  TinyQwen2 tiny;
  // Counts that do not fit are refused, naming what is wrong.
  tiny.kv_written = 3;
  const std::string three_kv = tiny.gguf("three_kv");
  EXPECT_NE(error_of([&] { models::llama_config_from_gguf(io::GgufFile::open(three_kv)); })
                .find("4 heads are not a multiple of 3 key/value heads"),
            std::string::npos);
  tiny.kv_written = 0;
  const std::string zero_kv = tiny.gguf("zero_kv");
  EXPECT_NE(error_of([&] { models::llama_config_from_gguf(io::GgufFile::open(zero_kv)); })
                .find("'qwen2.attention.head_count_kv' is 0"),
            std::string::npos);
  tiny.kv_written = TinyQwen2::kv;
  // A missing bias is named when the weights are bound.
  const std::string no_bias = tiny.gguf("no_bias", "blk.1.attn_k.bias");
  RunnerOptions o;
  o.model.context = 32;
  const std::string message = error_of([&] { LlamaRunner::open(no_bias, o); });
  EXPECT_NE(message.find("layers.1.attn.k_bias"), std::string::npos) << message;
}

TEST(Qwen2Config, FromHuggingFaceConfig) {
  nlohmann::json config = {{"model_type", "qwen2"},        {"num_hidden_layers", 24},
                           {"hidden_size", 896},           {"num_attention_heads", 14},
                           {"num_key_value_heads", 2},     {"intermediate_size", 4864},
                           {"vocab_size", 151936},         {"max_position_embeddings", 32768},
                           {"rms_norm_eps", 1e-6},         {"rope_theta", 1000000.0},
                           {"hidden_act", "silu"},         {"use_sliding_window", false},
                           {"sliding_window", 32768},      {"max_window_layers", 21},
                           {"tie_word_embeddings", true}};
  const models::LlamaConfig c = models::llama_config_from_hf(config);
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_base, 1e6);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(models::llama_tensor_path("model.layers.3.self_attn.k_proj.bias", "qwen2"), "layers.3.attn.k_bias");
  EXPECT_EQ(models::llama_tensor_path("blk.3.attn_v.bias", "qwen2"), "layers.3.attn.v_bias");
  // Llama's names do not take biases: a Llama checkpoint with one reports it as unexpected.
  EXPECT_EQ(models::llama_tensor_path("blk.3.attn_v.bias"), "blk.3.attn_v.bias");
  config["use_sliding_window"] = true;
  EXPECT_NE(error_of([&] { models::llama_config_from_hf(config); }).find("use_sliding_window"), std::string::npos);
  config["use_sliding_window"] = false;
  config["hidden_act"] = "gelu";
  EXPECT_NE(error_of([&] { models::llama_config_from_hf(config); }).find("hidden_act"), std::string::npos);
}

TEST(Qwen2, ChatPromptHasTheTemplatesSystemMessageAndTheGraphRuns) {
  RunnerOptions o;
  o.model.context = 64;
  o.model.chunk = 16;
  const TinyQwen2 tiny;
  auto runner = LlamaRunner::open(tiny.gguf("graph"), o);
  EXPECT_EQ(runner->config().architecture, "qwen2");
  const text::Tokenizer& t = runner->tokenizer();
  const std::vector<int32_t> ids = runner->prompt_ids("Hi", true);
  EXPECT_EQ(ids, t.encode("<|im_start|>system\nYou are Tiny.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                          "<|im_start|>assistant\n",
                          false));
  EXPECT_EQ(ids[0], *t.find_token("<|im_start|>"));
  // Prefill in chunks then decode gives what decoding every prompt token one by one gives.
  std::vector<int32_t> chunked, single;
  runner->generate(ids, 12, [&](int32_t id) { chunked.push_back(id); }, false);
  RunnerOptions one = o;
  one.model.chunk = 1;
  LlamaRunner::open(tiny.gguf("graph"), one)->generate(ids, 12, [&](int32_t id) { single.push_back(id); }, false);
  EXPECT_EQ(chunked, single);
  EXPECT_EQ(chunked.size(), 12u);
}

// The biases are read: the same weights with biases a tenth as large score differently, and the
// same weights as a Hugging Face directory (q_proj.bias...) score as the GGUF does.
TEST(Qwen2, BiasesCountAndAHuggingFaceCheckpointScoresAsTheGguf) {
  const TinyQwen2 tiny;
  const auto dir = std::filesystem::temp_directory_path() / ("iron_tiny_qwen2_hf_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RunnerOptions o;
  o.model.context = 64;
  const std::vector<int32_t> ids = {262, 259, 10, 72, 105, 263, 100, 256, 3, 40, 41};
  const Tensor from_gguf = LlamaRunner::open(tiny.gguf("hf"), o)->score(ids);
  const Tensor small_bias = LlamaRunner::open(TinyQwen2(0.1f).gguf("small_bias"), o)->score(ids);
  auto hf = LlamaRunner::open(tiny.hf(dir), o);
  EXPECT_EQ(hf->config().architecture, "qwen2");
  const Tensor from_hf = hf->score(ids);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(from_hf.shape(), from_gguf.shape());
  const std::vector<float> a = from_gguf.to_floats(), b = from_hf.to_floats(), c = small_bias.to_floats();
  double differs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + std::fabs(a[i]))) << i;
    differs = std::max(differs, double(std::fabs(a[i] - c[i])));
  }
  EXPECT_GT(differs, 0.1);
}

// The biases cost no steps of their own: the planner folds each into its projection and merges
// q, k and v into one matmul per layer (three parts, each with its bias), in the prefill and the
// decode versions alike.
TEST(Qwen2, BiasesFoldIntoOneMergedProjectionPerLayer) {
  models::LlamaOptions o;
  o.context = 32;
  o.chunk = 8;
  const std::string path = TinyQwen2().gguf("fold");
  auto model = models::make_decoder(models::llama_config_from_gguf(io::GgufFile::open(path)), o);
  model->load_state_dict(models::llama_state_dict(open_checkpoint(path), "qwen2"));
  for (const Shapes& shapes : {Shapes{{"tokens", InputSpec({8}, i32)}}, Shapes{}}) {
    const VersionView v = model->compile(shapes).describe();
    int merged_qkv = 0, adds = 0;
    for (const StepView& s : v.steps) {
      if (s.params.contains("parts") && s.params.integer("parts") == 3 && s.params.contains("bias") &&
          s.params.flag("bias"))
        ++merged_qkv;
      adds += s.op == "Add";
    }
    EXPECT_EQ(merged_qkv, int(TinyQwen2::layers)) << v.str();
    EXPECT_EQ(adds, 0) << v.str();
  }
}

// Qwen2.5-Coder-0.5B-Instruct (Q4_K_M: Q5_0, Q8_0, Q4_K, Q6_K weights) against the float64 numpy
// reference (scripts/reference/qwen2_numpy.py): 7 prompts (a chat turn, English, Python, C++,
// numbers, Chinese, a longer English text). IRON_QWEN2_MODEL names another file of the same
// weights. The Release build only: 152k-entry logits of a few hundred rows.
std::string qwen2_model() { return testing::model_file("IRON_QWEN2_MODEL", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"); }
#define IRON_NEEDS_QWEN2() IRON_NEEDS_MODEL(qwen2_model(), "qwen0.5b")

test::ReferenceCheck qwen2_check(Precision precision) {
  test::ReferenceCheck check;
  check.model = qwen2_model();
  check.golden = "qwen2_logits.json";
  check.context = 256;
  check.precision = precision;
  return check;
}

TEST(Qwen2, LogitsMatchAnIndependentNumpyReference) {
  IRON_NEEDS_QWEN2();
  test::ReferenceCheck check = qwen2_check(Precision::highest);
  check.margin_needed = 0;  // top-1 at every position, near ties included
  check.kl_bound = 1e-4;
  const test::ReferenceFigures f = test::check_against_reference(check);
  EXPECT_GE(f.positions, 300);
  EXPECT_EQ(f.top1_agree, f.positions);
  EXPECT_LE(f.kl_mean, 1e-6);
}

// At medium: activations rounded to int8 blocks for the quantised matmuls, as llama.cpp's dot
// products round them; no looser than llama.cpp itself on the same file and positions. llama.cpp
// (llama-cpp-python 0.3.36 built natively on a Zen 4, its default f16 cache:
// bench/accuracy_llama_cpp.py -m models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf -g
// tests/golden/qwen2_logits.json) agrees on top-1 at 347 of 356 positions, KL mean 8.4e-4, max
// 0.0156 nats. Measured here (Zen 4): the AVX-512 VNNI path 350 / 3.9e-4 / 7.0e-3 with an f32
// cache and 349 / 4.6e-4 / 4.6e-3 decoding over medium's f16 cache; the AVX2 path 348 / 4.6e-4 /
// 7.2e-3 and 352 / 5.1e-4 / 5.4e-3; the portable path rounds as at highest. Every top-1 whose
// margin exceeds 0.5 nats agrees. RoPE pairing adjacent dims (a wrong block) costs 0.9 nats a
// token (qwen2_logits.json's checks).
void expect_medium_close(bool decoding, std::optional<DType> cache) {
  test::ReferenceCheck check = qwen2_check(Precision::medium);
  check.cache = cache;
  check.decoding = decoding;
  check.margin_needed = 0.5;
  check.kl_bound = 0.0156;  // llama.cpp's largest
  const test::ReferenceFigures f = test::check_against_reference(check);
  EXPECT_LE(f.kl_mean, 8.4e-4);  // llama.cpp's
  EXPECT_GE(f.top1_agree, 347);  // llama.cpp's
}

TEST(Qwen2, LogitsAtMediumPrecisionStayCloseToTheReference) {
  IRON_NEEDS_QWEN2();
  expect_medium_close(false, f32);  // the matmuls' rounding alone
}

TEST(Qwen2, DecodingAtMediumStaysCloseToTheReference) {
  IRON_NEEDS_QWEN2();
  expect_medium_close(true, std::nullopt);  // decode steps over medium's own cache type (f16)
}

// Qwen2.5-Coder-1.5B-Instruct (Q4_K_M; 28 blocks, width 1536, 935 MiB of weights a token) against
// the same float64 reference on the same prompts (qwen2_1_5b_logits.json). Out of CI: 1.1 GB
// (scripts/fetch-model.sh qwen1.5b); without the file it skips, naming it. IRON_QWEN2_1_5B_MODEL
// names another file of the same weights.
std::string qwen2_1_5b_model() {
  return testing::model_file("IRON_QWEN2_1_5B_MODEL", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
}

test::ReferenceCheck qwen2_1_5b_check(Precision precision) {
  test::ReferenceCheck check = qwen2_check(precision);
  check.model = qwen2_1_5b_model();
  check.golden = "qwen2_1_5b_logits.json";
  return check;
}

TEST(Qwen2OneAndAHalfB, LogitsMatchAnIndependentNumpyReference) {
  IRON_NEEDS_MODEL(qwen2_1_5b_model(), "qwen1.5b");
  test::ReferenceCheck check = qwen2_1_5b_check(Precision::highest);
  check.margin_needed = 0;
  check.kl_bound = 1e-4;
  const test::ReferenceFigures f = test::check_against_reference(check);
  EXPECT_GE(f.positions, 300);
  EXPECT_EQ(f.top1_agree, f.positions);
  EXPECT_LE(f.kl_mean, 1e-6);
}

// At medium, no looser than llama.cpp on the same file and positions: llama-cpp-python 0.3.36
// built natively on the Zen 3 (AVX2), its default f16 cache (bench/accuracy_llama_cpp.py -m
// models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -g tests/golden/qwen2_1_5b_logits.json) agrees
// on top-1 at 341 of 356 positions, KL mean 0.0346, max 3.7 nats, every prompt's worst position
// its first (0.78-3.7 nats there; why, not looked into). Measured here (the Zen 3's AVX2 path):
// 347 / 0.00295 / 0.191.
TEST(Qwen2OneAndAHalfB, DecodingAtMediumStaysCloseToTheReference) {
  IRON_NEEDS_MODEL(qwen2_1_5b_model(), "qwen1.5b");
  test::ReferenceCheck check = qwen2_1_5b_check(Precision::medium);
  check.decoding = true;  // decode steps over medium's own cache type (f16), as a chat makes them
  check.margin_needed = 0.5;
  check.kl_bound = 3.7;  // llama.cpp's largest
  const test::ReferenceFigures f = test::check_against_reference(check);
  EXPECT_LE(f.kl_mean, 0.0346);  // llama.cpp's
  EXPECT_GE(f.top1_agree, 341);  // llama.cpp's
}

}  // namespace
}  // namespace iron
