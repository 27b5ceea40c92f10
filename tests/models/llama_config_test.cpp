// LlamaConfig from the two test models (facts in shared/models/SOURCES.md), from a config.json,
// and from malformed metadata; the checkpoint-name mapping.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/models/llama_config.hpp"

namespace iron::models {
namespace {

using io::testing::expect_error;
using io::testing::GgufWriter;
using nlohmann::json;

const std::string kSmolLM2 = io::testing::local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");

TEST(LlamaConfigGguf, Stories260K) {
  IRON_NEEDS_STORIES();
  const LlamaConfig c = llama_config_from_gguf(io::GgufFile::open(io::testing::stories_path()));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.layers, 5);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.ffn, 172);
  EXPECT_EQ(c.vocab, 512);
  EXPECT_EQ(c.context, 2048);       // the converter's default; the model was trained with 512
  EXPECT_EQ(c.rope_base, 10000.0);  // no llama.rope.freq_base key
  EXPECT_NEAR(c.rms_eps, 1e-5, 1e-10);
  EXPECT_EQ(c.rope_mode, "adjacent");
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_FALSE(c.tied_embeddings);  // output.weight is present (a copy of token_embd.weight)
  EXPECT_EQ(c.describe(),
            "llama: 5 layers, dim 64, 8 heads (4 kv, head_dim 8), ffn 172, vocab 512, context "
            "2048, rope adjacent base 10000 dims 8, rms_eps 1e-05, separate output weight");
}

TEST(LlamaConfigGguf, SmolLM2) {
  if (!std::filesystem::exists(kSmolLM2)) GTEST_SKIP() << kSmolLM2 << " is absent";
  const LlamaConfig c = llama_config_from_gguf(io::GgufFile::open(kSmolLM2));
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 1536);
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_EQ(c.context, 8192);
  EXPECT_EQ(c.rope_base, 100000.0);
  EXPECT_EQ(c.rope_dims, 64);
  EXPECT_EQ(c.rope_mode, "adjacent");
  EXPECT_TRUE(c.tied_embeddings);  // no output.weight
}

// Llama metadata for a model of `dim` x `heads`; `skip` leaves one key out.
GgufWriter llama_meta(int64_t heads = 4, int64_t kv_heads = 2, const std::string& skip = "",
                      const std::string& arch = "llama") {
  GgufWriter w;
  w.kv_string("general.architecture", arch);
  auto put = [&](const std::string& key, uint32_t value) {
    if (key != skip) w.kv<uint32_t>(arch + "." + key, 4, value);
  };
  put("block_count", 2);
  put("embedding_length", 32);
  put("attention.head_count", uint32_t(heads));
  put("attention.head_count_kv", uint32_t(kv_heads));
  put("feed_forward_length", 64);
  put("context_length", 128);
  put("vocab_size", 10);
  return w;
}

LlamaConfig from(const GgufWriter& w) {
  return llama_config_from_gguf(
      io::GgufFile::parse(io::MappedFile::from_bytes("m.gguf", w.build())));
}

TEST(LlamaConfigGguf, SyntheticDefaults) {
  GgufWriter w = llama_meta();
  w.tensor("token_embd.weight", {32, 10}, 0, std::vector<uint8_t>(32 * 10 * 4));
  const LlamaConfig c = from(w);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_dims, 8);
  EXPECT_EQ(c.rope_base, 10000.0);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.vocab, 10);
  EXPECT_TRUE(c.tied_embeddings);

  GgufWriter more = llama_meta();
  more.kv<float>("llama.rope.freq_base", 6, 500000.0f);
  more.kv<float>("llama.attention.layer_norm_rms_epsilon", 6, 1e-6f);
  more.kv<uint32_t>("llama.rope.dimension_count", 4, 4);
  const LlamaConfig d = from(more);
  EXPECT_EQ(d.rope_base, 500000.0);
  EXPECT_NEAR(d.rms_eps, 1e-6, 1e-12);
  EXPECT_EQ(d.rope_dims, 4);

  // Without llama.vocab_size the tokenizer's token count gives the vocabulary.
  GgufWriter tokens = llama_meta(4, 2, "vocab_size");
  tokens.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a", "b", "c"}));
  EXPECT_EQ(from(tokens).vocab, 3);
  // Without either, token_embd.weight's rows do.
  GgufWriter embed = llama_meta(4, 2, "vocab_size");
  embed.tensor("token_embd.weight", {32, 7}, 0, std::vector<uint8_t>(32 * 7 * 4));
  EXPECT_EQ(from(embed).vocab, 7);
  // A missing head_count_kv means plain multi-head attention.
  EXPECT_EQ(from(llama_meta(4, 2, "attention.head_count_kv")).kv_heads, 4);
}

TEST(LlamaConfigGguf, MalformedMetadataIsNamed) {
  expect_error([] { from(llama_meta(0, 1)); }, "'llama.attention.head_count' is 0");
  expect_error([] { from(llama_meta(4, 3)); }, "4 heads are not a multiple of 3 key/value heads");
  expect_error([] { from(llama_meta(4, 0)); }, "'llama.attention.head_count_kv' is 0");
  expect_error([] { from(llama_meta(5, 5)); },
               "'llama.embedding_length' 32 is not a multiple of 'llama.attention.head_count' 5");
  expect_error([] { from(llama_meta(4, 2, "block_count")); },
               "metadata key 'llama.block_count' is missing");
  expect_error([] { from(llama_meta(4, 2, "context_length")); },
               "metadata key 'llama.context_length' is missing");
  expect_error([] { from(llama_meta(4, 2, "vocab_size")); }, "vocabulary size is unknown");
  expect_error([] { from(llama_meta(4, 2, "", "bert")); }, "'bert', not an architecture IRON runs");

  GgufWriter no_arch;
  no_arch.kv<uint32_t>("llama.block_count", 4, 2);
  expect_error([&] { from(no_arch); }, "'general.architecture' is missing");

  GgufWriter mistyped = llama_meta(4, 2, "block_count");
  mistyped.kv_string("llama.block_count", "two");
  expect_error([&] { from(mistyped); }, "'llama.block_count' holds string");

  GgufWriter huge = llama_meta(4, 2, "block_count");
  huge.kv<uint64_t>("llama.block_count", 10, uint64_t(1) << 40);
  expect_error([&] { from(huge); }, "above the limit");

  GgufWriter odd_rope = llama_meta();
  odd_rope.kv<uint32_t>("llama.rope.dimension_count", 4, 3);
  expect_error([&] { from(odd_rope); }, "rope_dims 3 must be even");

  GgufWriter bad_eps = llama_meta();
  bad_eps.kv<float>("llama.attention.layer_norm_rms_epsilon", 6, -1.0f);
  expect_error([&] { from(bad_eps); }, "RMSNorm epsilon");

  GgufWriter bad_embed = llama_meta();
  bad_embed.tensor("token_embd.weight", {32, 9}, 0, std::vector<uint8_t>(32 * 9 * 4));
  expect_error([&] { from(bad_embed); }, "tensor 'token_embd.weight' is not 32x10");

  GgufWriter scaled = llama_meta();
  scaled.kv_string("llama.rope.scaling.type", "yarn");
  expect_error([&] { from(scaled); }, "RoPE scaling 'yarn'");
}

// ---- config.json ------------------------------------------------------------------------

json smollm2_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
    "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152,
    "max_position_embeddings": 8192, "rope_theta": 100000, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": true, "rope_scaling": null, "torch_dtype": "bfloat16"})");
}

TEST(LlamaConfigHf, SmolLM2StyleConfig) {
  const LlamaConfig c = llama_config_from_hf(smollm2_config());
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 1536);
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_EQ(c.context, 8192);
  EXPECT_EQ(c.rope_base, 100000.0);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.rope_mode, "halves");
  EXPECT_EQ(c.rope_dims, 64);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.architecture, "llama");
}

TEST(LlamaConfigHf, DefaultsAndExplicitHeadDim) {
  json config = smollm2_config();
  for (const char* key :
       {"num_key_value_heads", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "model_type"})
    config.erase(key);
  LlamaConfig c = llama_config_from_hf(config);
  EXPECT_EQ(c.kv_heads, 9);
  EXPECT_EQ(c.rope_base, 10000.0);
  EXPECT_EQ(c.rms_eps, 1e-6);
  EXPECT_FALSE(c.tied_embeddings);

  json explicit_head = smollm2_config();
  explicit_head["hidden_size"] = 512;
  explicit_head["num_attention_heads"] = 8;
  explicit_head["num_key_value_heads"] = 8;
  explicit_head["head_dim"] = 64;
  EXPECT_EQ(llama_config_from_hf(explicit_head).head_dim, 64);
  explicit_head["head_dim"] = 32;  // 8 x 32 need not be 512: q projects to 256, o back to 512
  EXPECT_EQ(llama_config_from_hf(explicit_head).head_dim, 32);
}

TEST(LlamaConfigHf, MalformedConfigsAreNamed) {
  auto with = [](const char* key, json value) {
    json config = smollm2_config();
    config[key] = std::move(value);
    return config;
  };
  expect_error([&] { llama_config_from_hf(with("num_attention_heads", 0)); },
               "'num_attention_heads' is 0");
  expect_error([&] { llama_config_from_hf(with("num_key_value_heads", 2)); },
               "9 heads are not a multiple of 2 key/value heads");
  expect_error([&] { llama_config_from_hf(with("hidden_size", 577)); },
               "'hidden_size' 577 is not a multiple of 'num_attention_heads' 9");
  expect_error([&] { llama_config_from_hf(with("num_hidden_layers", "30")); },
               "'num_hidden_layers' is \"30\", not an integer");
  expect_error([&] { llama_config_from_hf(with("intermediate_size", 1536.5)); },
               "'intermediate_size' is 1536.5, not an integer");
  expect_error([&] { llama_config_from_hf(with("vocab_size", -1)); }, "'vocab_size' is -1");
  expect_error([&] { llama_config_from_hf(with("rope_theta", "big")); }, "'rope_theta'");
  expect_error([&] { llama_config_from_hf(with("tie_word_embeddings", 1)); },
               "'tie_word_embeddings'");
  expect_error([&] { llama_config_from_hf(with("model_type", "bert")); }, "not a model IRON runs");
  expect_error(
      [&] {
        llama_config_from_hf(with("rope_scaling", {{"type", "linear"}, {"factor", 2}}));
      },
      "RoPE scaling");
  json missing = smollm2_config();
  missing.erase("vocab_size");
  expect_error([&] { llama_config_from_hf(missing); }, "the key 'vocab_size' is missing");
  expect_error([] { llama_config_from_hf(json::array()); }, "not a JSON object");
}

// ---- tensor names -------------------------------------------------------------------------

TEST(LlamaStateDict, GgufAndHfNames) {
  EXPECT_EQ(llama_tensor_path("token_embd.weight"), "embed");
  EXPECT_EQ(llama_tensor_path("output_norm.weight"), "norm");
  EXPECT_EQ(llama_tensor_path("output.weight"), "output");
  EXPECT_EQ(llama_tensor_path("blk.3.attn_q.weight"), "layers.3.attn.q");
  EXPECT_EQ(llama_tensor_path("blk.12.attn_output.weight"), "layers.12.attn.o");
  EXPECT_EQ(llama_tensor_path("blk.0.ffn_down.weight"), "layers.0.ffn.down");
  EXPECT_EQ(llama_tensor_path("blk.0.ffn_norm.weight"), "layers.0.ffn_norm");
  EXPECT_EQ(llama_tensor_path("model.embed_tokens.weight"), "embed");
  EXPECT_EQ(llama_tensor_path("model.norm.weight"), "norm");
  EXPECT_EQ(llama_tensor_path("lm_head.weight"), "output");
  EXPECT_EQ(llama_tensor_path("model.layers.3.self_attn.q_proj.weight"), "layers.3.attn.q");
  EXPECT_EQ(llama_tensor_path("model.layers.3.self_attn.o_proj.weight"), "layers.3.attn.o");
  EXPECT_EQ(llama_tensor_path("model.layers.7.input_layernorm.weight"), "layers.7.attn_norm");
  EXPECT_EQ(llama_tensor_path("model.layers.7.post_attention_layernorm.weight"),
            "layers.7.ffn_norm");
  EXPECT_EQ(llama_tensor_path("model.layers.7.mlp.gate_proj.weight"), "layers.7.ffn.gate");
  EXPECT_EQ(llama_tensor_path("model.layers.7.mlp.up_proj.weight"), "layers.7.ffn.up");
  // Unknown names, and layer numbers that are not plain decimals, stay as they are.
  for (const char* name :
       {"rope_freqs.weight", "blk.3.attn_q.bias", "blk.03.attn_q.weight", "blk.x.attn_q.weight",
        "blk..attn_q.weight", "model.layers.1.foo", "blk.3"})
    EXPECT_EQ(llama_tensor_path(name), name);
}

TEST(LlamaStateDict, Stories260KRenamedAndShared) {
  IRON_NEEDS_STORIES();
  const StateDict checkpoint = open_checkpoint(io::testing::stories_path());
  const StateDict model = llama_state_dict(checkpoint);
  EXPECT_EQ(model.size(), 48u);
  for (const char* name : {"embed", "norm", "output"}) EXPECT_TRUE(model.contains(name)) << name;
  for (int layer = 0; layer < 5; ++layer) {
    for (const char* part : {"attn.q", "attn.k", "attn.v", "attn.o", "attn_norm", "ffn.gate",
                             "ffn.up", "ffn.down", "ffn_norm"}) {
      EXPECT_TRUE(model.contains("layers." + std::to_string(layer) + "." + part))
          << layer << " " << part;
    }
  }
  EXPECT_EQ(model.at("layers.2.attn.k").shape(), (Shape{32, 64}));
  EXPECT_EQ(model.at("layers.2.ffn.down").shape(), (Shape{64, 172}));
  EXPECT_EQ(model.at("embed").shape(), (Shape{512, 64}));
  // Borrowed, not copied.
  EXPECT_EQ(model.at("layers.4.attn.q").data(), checkpoint.at("blk.4.attn_q.weight").data());
}

TEST(LlamaStateDict, UnknownNamesKeptAndCollisionsRefused) {
  StateDict checkpoint;
  checkpoint.insert("model.layers.0.self_attn.q_proj.weight", Tensor::zeros({4, 4}, f32));
  checkpoint.insert("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({2}, f32));
  const StateDict model = llama_state_dict(checkpoint);
  EXPECT_TRUE(model.contains("layers.0.attn.q"));
  EXPECT_TRUE(model.contains("model.layers.0.self_attn.rotary_emb.inv_freq"));

  StateDict twice;
  twice.insert("token_embd.weight", Tensor::zeros({2, 2}, f32));
  twice.insert("model.embed_tokens.weight", Tensor::zeros({2, 2}, f32));
  expect_error([&] { llama_state_dict(twice); }, "maps to 'embed'");
}

}  // namespace
}  // namespace iron::models
