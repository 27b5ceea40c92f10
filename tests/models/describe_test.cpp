// describe_checkpoint, the text `iron info` prints, on real and generated files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "iron/models/describe.hpp"

namespace iron::models {
namespace {

using io::testing::as_bytes;
using io::testing::expect_error;
using io::testing::GgufWriter;
using io::testing::write_temp_file;

void expect_contains(const std::string& text, const std::string& line) {
  EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << text;
}

TEST(DescribeCheckpoint, Stories260K) {
  IRON_NEEDS_STORIES();
  const std::string text = describe_checkpoint(io::testing::stories_path());
  expect_contains(text, "(1185376 bytes, 1.13 MiB)\n");
  expect_contains(text, "format: GGUF version 3, alignment 32, tensor data at byte 14176\n");
  expect_contains(text, "metadata: 19 keys\n");
  expect_contains(text, "  general.architecture                    string           \"llama\"\n");
  expect_contains(text, "  llama.block_count                       u32              5\n");
  expect_contains(text, "  llama.attention.layer_norm_rms_epsilon  f32              1e-05\n");
  expect_contains(text,
                  "  tokenizer.ggml.tokens                   array of string  [512] "
                  "\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\", \"<0x01>\", \"<0x02>\", ...\n");
  expect_contains(text, "  tokenizer.ggml.padding_token_id         u32              4294967295\n");
  expect_contains(text, "tensors: 48\n");
  expect_contains(text,
                  "  token_embd.weight         F32    [512, 64]        131072         14176\n");
  expect_contains(text,
                  "  blk.4.ffn_norm.weight     F32    [64]                256       1185120\n");
  expect_contains(text, "totals: 48 tensors, 292800 parameters, 1171200 bytes (1.12 MiB)\n");
  expect_contains(text, "  F32          48 tensors      1171200 bytes (1.12 MiB)\n");
  expect_contains(text,
                  "model config: llama: 5 layers, dim 64, 8 heads (4 kv, head_dim 8), ffn 172, "
                  "vocab 512, context 2048, rope adjacent base 10000 dims 8, rms_eps 1e-05, "
                  "separate output weight\n");
  expect_contains(text,
                  "tokenizer: llama (SentencePiece BPE), vocab 512, bos 1 \"<s>\", eos 2 "
                  "\"</s>\", add bos yes, chat template absent\n");

  const std::string brief =
      describe_checkpoint(io::testing::stories_path(), {.array_items = 2, .tensors = false});
  EXPECT_EQ(brief.find("token_embd.weight"), std::string::npos);
  expect_contains(brief, "totals: 48 tensors");
  expect_contains(brief, "[512] \"<unk>\", \"<s>\", ...\n");
}

TEST(DescribeCheckpoint, SmolLM2) {
  const std::string path = io::testing::local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const std::string text = describe_checkpoint(path);
  expect_contains(text, "metadata: 33 keys\n");
  expect_contains(text,
                  "tokenizer.chat_template                 string           \"{% for message "
                  "in messages %}{% if loop.first and messages[0]['r\"... (368 bytes)\n");
  expect_contains(text, "Q4_1        210 tensors");
  expect_contains(text, "Q8_0          1 tensors");
  expect_contains(text, "totals: 272 tensors, 134515008 parameters");
  expect_contains(text, "tied embeddings\n");
  expect_contains(text,
                  "tokenizer: gpt2 (byte-level BPE, pre-tokenizer smollm), vocab 49152, bos "
                  "1 \"<|im_start|>\", eos 2 \"<|im_end|>\", add bos no, chat template "
                  "present (368 bytes)\n");
}

TEST(DescribeCheckpoint, ValuesOfEveryKind) {
  GgufWriter w;
  w.kv<int8_t>("k.i8", 1, -5);
  w.kv<uint64_t>("k.u64", 10, 1234567890123ull);
  w.kv<double>("k.f64", 12, 0.25);
  w.kv<uint8_t>("k.bool", 7, 1);
  w.kv_string("k.long", std::string(100, 'x'));
  w.kv_string("k.escapes", "a\"b\\c\nd\x01");
  w.kv_string("k.utf8", "\xC3\xA9\xC3\xA9\xC3\xA9");  // three two-byte characters
  w.raw_kv("k.nested", 9,
           GgufWriter::nested_array(
               {GgufWriter::array<int32_t>(5, {1, 2}), GgufWriter::array<int32_t>(5, {3})}));
  w.raw_kv("k.empty", 9, GgufWriter::array<float>(6, {}));
  w.tensor("t.q", {32}, 30 /* BF16 */, std::vector<uint8_t>(64));
  const std::string path = write_temp_file("describe_kinds.gguf", w.build());
  const std::string text = describe_checkpoint(path, {.string_chars = 2});
  const std::string wide = describe_checkpoint(path);
  std::filesystem::remove(path);
  expect_contains(wide, "k.escapes  string          \"a\\\"b\\\\c\\nd\\x01\"\n");
  expect_contains(wide, "k.utf8     string          \"\xC3\xA9\xC3\xA9\xC3\xA9\"\n");
  expect_contains(text, "k.i8       i8              -5\n");
  expect_contains(text, "k.u64      u64             1234567890123\n");
  expect_contains(text, "k.f64      f64             0.25\n");
  expect_contains(text, "k.bool     bool            true\n");
  expect_contains(text, "k.long     string          \"xx\"... (100 bytes)\n");
  expect_contains(text, "k.escapes  string          \"a\\\"\"... (8 bytes)\n");
  expect_contains(text, "k.utf8     string          \"\xC3\xA9\xC3\xA9\"... (6 bytes)\n");
  expect_contains(text, "k.nested   array of array  [2] [2 items], [1 items]\n");
  expect_contains(text, "k.empty    array of f32    [0]\n");
  expect_contains(text, "  t.q   BF16   [32]");
  EXPECT_EQ(text.find("model config"), std::string::npos);  // no architecture, no model line
  EXPECT_EQ(text.find("tokenizer:"), std::string::npos);
}

// What the file says reaches the terminal escaped: keys, tensor names and vocabulary entries
// with invalid UTF-8 or control bytes (an escape sequence) print as \xNN, never raw.
TEST(DescribeCheckpoint, InvalidUtf8AndControlBytesAreEscaped) {
  GgufWriter w;
  w.kv_string("general.architecture", "llama\xff");
  w.kv_string("k.\xfe", "v");
  w.kv_string("tokenizer.ggml.model", "llama");
  w.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"<unk>", "\xfe\x1b]0;title\x07", "a"}));
  w.kv<uint32_t>("tokenizer.ggml.bos_token_id", 4, 1);
  w.tensor("t.\xff\x1b[2J", {4}, 0 /* F32 */, std::vector<uint8_t>(16));
  const std::string path = write_temp_file("describe_invalid_utf8.gguf", w.build());
  const std::string text = describe_checkpoint(path);
  std::filesystem::remove(path);
  for (char raw : {'\xff', '\xfe', '\x1b', '\x07'}) EXPECT_EQ(text.find(raw), std::string::npos) << text;
  expect_contains(text, "  k.\\xfe ");
  expect_contains(text, "\"<unk>\", \"\\xfe\\x1b]0;title\\x07\", \"a\"");
  expect_contains(text, "  t.\\xff\\x1b[2J  F32");
  expect_contains(text, "model: architecture \"llama\\xff\"");
}

TEST(DescribeCheckpoint, BrokenModelMetadataIsReportedNotThrown) {
  GgufWriter w;
  w.kv_string("general.architecture", "llama");
  w.kv<uint32_t>("llama.block_count", 4, 0);
  w.kv_string("tokenizer.ggml.model", "llama");
  const std::string path = write_temp_file("describe_broken.gguf", w.build());
  const std::string text = describe_checkpoint(path);
  std::filesystem::remove(path);
  expect_contains(text, "model config: error: ");
  expect_contains(text, "tokenizer: error: ");
  expect_contains(text, "'tokenizer.ggml.tokens' is missing");

  GgufWriter other;
  other.kv_string("general.architecture", "bert");
  const std::string other_path = write_temp_file("describe_bert.gguf", other.build());
  const std::string other_text = describe_checkpoint(other_path);
  std::filesystem::remove(other_path);
  expect_contains(other_text, "model: architecture \"bert\" (not one IRON runs: llama, gemma3, qwen2)\n");
}

TEST(DescribeCheckpoint, SafetensorsWithConfig) {
  std::vector<uint8_t> data = as_bytes(std::vector<float>(8 * 4 + 4, 0.5f));
  const std::string header = R"({
    "__metadata__": {"format": "pt"},
    "model.embed_tokens.weight": {"dtype": "F32", "shape": [8, 4], "data_offsets": [0, 128]},
    "model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [128, 144]}})";
  const std::string path =
      write_temp_file("describe.safetensors", io::testing::safetensors_bytes(header, data));
  const auto dir = std::filesystem::path(path).parent_path() / "iron_describe_config";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "num_hidden_layers": 1,
      "hidden_size": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
      "intermediate_size": 8, "vocab_size": 8, "max_position_embeddings": 16,
      "tie_word_embeddings": true})";

  const std::string plain = describe_checkpoint(path);
  expect_contains(plain, "format: safetensors, header ");
  expect_contains(plain, "metadata: 1 keys\n  format  string  \"pt\"\n");
  expect_contains(plain, "  model.embed_tokens.weight  F32    [8, 4]");
  expect_contains(plain, "totals: 2 tensors, 36 parameters, 144 bytes (144 B)\n");
  EXPECT_EQ(plain.find("model config"), std::string::npos);

  const std::string with_config =
      describe_checkpoint(path, {.config_path = (dir / "config.json").string()});
  expect_contains(with_config,
                  "model config: llama: 1 layers, dim 4, 2 heads (1 kv, head_dim 2), ffn 8, "
                  "vocab 8, context 16, rope halves base 10000 dims 2, rms_eps 1e-06, tied "
                  "embeddings\n");
  // A config named but absent is an error (issue 17: it used to be a line of the description).
  expect_error([&] { describe_checkpoint(path, {.config_path = (dir / "absent.json").string()}); },
               "absent.json: cannot open the config", ErrorKind::io);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

TEST(DescribeCheckpoint, UnreadableFilesThrow) {
  IRON_NEEDS_STORIES();
  expect_error([] { describe_checkpoint("/nonexistent/model.gguf"); }, "/nonexistent/model.gguf",
               ErrorKind::io);
  expect_error([] { describe_checkpoint(::testing::TempDir()); }, "is a directory", ErrorKind::io);
  const std::string text_file = write_temp_file("describe.txt", {'h', 'i', '\n'});
  expect_error([&] { describe_checkpoint(text_file); }, "not a GGUF or safetensors file");
  std::filesystem::remove(text_file);
  auto bytes = io::testing::read_bytes(io::testing::stories_path());
  bytes.resize(200);
  const std::string truncated = write_temp_file("describe_truncated.gguf", bytes);
  expect_error([&] { describe_checkpoint(truncated); }, "describe_truncated.gguf");
  std::filesystem::remove(truncated);
}

}  // namespace
}  // namespace iron::models
