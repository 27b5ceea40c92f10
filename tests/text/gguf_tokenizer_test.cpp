// tokenizer_from_gguf: the tokenizer.* metadata of real and hand-built GGUF files.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/io_test_util.hpp"
#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::text {
namespace {

using io::testing::expect_error;
using io::testing::GgufWriter;

io::GgufFile parse(const GgufWriter& writer) {
  return io::GgufFile::parse(io::MappedFile::from_bytes("tok.gguf", writer.build()));
}

// A tiny SentencePiece vocabulary: <unk> <s> </s> then a few pieces.
GgufWriter tiny_llama() {
  GgufWriter w;
  w.kv_string("tokenizer.ggml.model", "llama");
  w.raw_kv("tokenizer.ggml.tokens", 9,
           GgufWriter::string_array({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                     "\xE2\x96\x81"
                                     "a"}));
  w.raw_kv("tokenizer.ggml.scores", 9, GgufWriter::array<float>(6, {0, 0, 0, -1, -2, -3, -0.5f}));
  w.raw_kv("tokenizer.ggml.token_type", 9, GgufWriter::array<int32_t>(5, {2, 3, 3, 1, 1, 1, 1}));
  w.kv<uint32_t>("tokenizer.ggml.unknown_token_id", 4, 0);
  w.kv<uint32_t>("tokenizer.ggml.bos_token_id", 4, 1);
  w.kv<uint32_t>("tokenizer.ggml.eos_token_id", 4, 2);
  return w;
}

TEST(GgufTokenizer, Stories260KMetadata) {
  IRON_NEEDS_STORIES();
  const io::GgufFile gguf = io::GgufFile::open(io::testing::stories_path());
  const TokenizerData d = tokenizer_data_from_gguf(gguf);
  EXPECT_EQ(d.model, "llama");
  EXPECT_EQ(d.pre, "");
  EXPECT_EQ(d.tokens.size(), 512u);
  EXPECT_EQ(d.tokens[1], "<s>");
  EXPECT_EQ(d.tokens[3], "<0x00>");
  EXPECT_EQ(d.scores.size(), 512u);
  EXPECT_EQ(d.scores.back(), -252.0f);
  ASSERT_EQ(d.token_types.size(), 512u);
  EXPECT_EQ(d.token_types[0], 2);
  EXPECT_EQ(d.token_types[1], 3);
  EXPECT_EQ(d.token_types[3], 6);
  EXPECT_TRUE(d.merges.empty());
  EXPECT_EQ(d.unk_id, 0);
  EXPECT_EQ(d.bos_id, 1);
  EXPECT_EQ(d.eos_id, 2);
  EXPECT_EQ(d.pad_id, std::nullopt);  // stored as 0xFFFFFFFF
  EXPECT_EQ(d.add_bos, std::nullopt);
  EXPECT_EQ(d.add_space_prefix, std::nullopt);
  EXPECT_EQ(d.chat_template, std::nullopt);

  const Tokenizer t = tokenizer_from_gguf(gguf);
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.pad_id(), std::nullopt);
  EXPECT_TRUE(t.add_bos_by_default());
  EXPECT_EQ(t.encode("Zoo", true), (std::vector<int32_t>{1, 410, 469, 347}));
}

TEST(GgufTokenizer, SmolLM2Metadata) {
  const std::string path = io::testing::local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const io::GgufFile gguf = io::GgufFile::open(path);
  const TokenizerData d = tokenizer_data_from_gguf(gguf);
  EXPECT_EQ(d.model, "gpt2");
  EXPECT_EQ(d.pre, "smollm");
  EXPECT_EQ(d.tokens.size(), 49152u);
  EXPECT_EQ(d.merges.size(), 48900u);
  EXPECT_EQ(d.merges.front(), "\xC4\xA0 t");
  EXPECT_EQ(d.bos_id, 1);
  EXPECT_EQ(d.eos_id, 2);
  EXPECT_EQ(d.unk_id, 0);
  EXPECT_EQ(d.pad_id, 2);
  EXPECT_EQ(d.add_bos, false);
  EXPECT_EQ(d.add_space_prefix, false);
  ASSERT_TRUE(d.chat_template.has_value());
  EXPECT_NE(d.chat_template->find("<|im_start|>"), std::string::npos);
  const Tokenizer t = tokenizer_from_gguf(gguf);
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_FALSE(t.add_bos_by_default());
}

TEST(GgufTokenizer, TinyHandBuiltVocabulary) {
  const io::GgufFile gguf = parse(tiny_llama());
  const Tokenizer t = tokenizer_from_gguf(gguf);
  EXPECT_EQ(t.vocab_size(), 7);
  EXPECT_EQ(t.encode("a", true), (std::vector<int32_t>{1, 6}));
}

TEST(GgufTokenizer, AbsentIdsBecomeNone) {
  GgufWriter w = tiny_llama();
  w.kv<uint32_t>("tokenizer.ggml.padding_token_id", 4, 0xFFFFFFFFu);
  w.kv<uint32_t>("tokenizer.ggml.seperator_token_id", 4, 0xFFFFFFFFu);
  const TokenizerData d = tokenizer_data_from_gguf(parse(w));
  EXPECT_EQ(d.pad_id, std::nullopt);

  // An id at or past the vocabulary size, or a negative one, means "none" too.
  GgufWriter past;
  past.kv_string("tokenizer.ggml.model", "llama");
  past.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"<unk>", "<s>", "</s>"}));
  past.kv<uint32_t>("tokenizer.ggml.bos_token_id", 4, 3);
  past.kv<int32_t>("tokenizer.ggml.eos_token_id", 5, -1);
  past.kv<uint64_t>("tokenizer.ggml.padding_token_id", 10, 1);
  const TokenizerData p = tokenizer_data_from_gguf(parse(past));
  EXPECT_EQ(p.bos_id, std::nullopt);
  EXPECT_EQ(p.eos_id, std::nullopt);
  EXPECT_EQ(p.pad_id, 1);
}

TEST(GgufTokenizer, FlagsAndTemplate) {
  GgufWriter w = tiny_llama();
  w.kv<uint8_t>("tokenizer.ggml.add_bos_token", 7, 0);
  w.kv<uint8_t>("tokenizer.ggml.add_space_prefix", 7, 1);
  w.kv_string("tokenizer.chat_template", "{{ messages }}");
  const TokenizerData d = tokenizer_data_from_gguf(parse(w));
  EXPECT_EQ(d.add_bos, false);
  EXPECT_EQ(d.add_space_prefix, true);
  EXPECT_EQ(d.chat_template, "{{ messages }}");
}

TEST(GgufTokenizer, MissingRequiredKeysAreNamed) {
  GgufWriter no_model;
  no_model.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  expect_error([&] { tokenizer_data_from_gguf(parse(no_model)); }, "'tokenizer.ggml.model'");

  GgufWriter no_tokens;
  no_tokens.kv_string("tokenizer.ggml.model", "llama");
  expect_error([&] { tokenizer_data_from_gguf(parse(no_tokens)); }, "'tokenizer.ggml.tokens'");

  GgufWriter empty_tokens;
  empty_tokens.kv_string("tokenizer.ggml.model", "llama");
  empty_tokens.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({}));
  expect_error([&] { tokenizer_data_from_gguf(parse(empty_tokens)); }, "empty");
}

TEST(GgufTokenizer, MistypedKeysAreNamed) {
  GgufWriter model_number;
  model_number.kv<uint32_t>("tokenizer.ggml.model", 4, 1);
  model_number.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  expect_error([&] { tokenizer_data_from_gguf(parse(model_number)); }, "'tokenizer.ggml.model'");

  GgufWriter int_tokens;
  int_tokens.kv_string("tokenizer.ggml.model", "llama");
  int_tokens.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::array<int32_t>(5, {1, 2}));
  expect_error([&] { tokenizer_data_from_gguf(parse(int_tokens)); }, "'tokenizer.ggml.tokens'");

  GgufWriter bad_scores;
  bad_scores.kv_string("tokenizer.ggml.model", "llama");
  bad_scores.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  bad_scores.raw_kv("tokenizer.ggml.scores", 9, GgufWriter::string_array({"x"}));
  expect_error([&] { tokenizer_data_from_gguf(parse(bad_scores)); }, "'tokenizer.ggml.scores'");

  GgufWriter bos_string;
  bos_string.kv_string("tokenizer.ggml.model", "llama");
  bos_string.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  bos_string.kv_string("tokenizer.ggml.bos_token_id", "1");
  expect_error([&] { tokenizer_data_from_gguf(parse(bos_string)); },
               "'tokenizer.ggml.bos_token_id'");

  GgufWriter flag_number;
  flag_number.kv_string("tokenizer.ggml.model", "llama");
  flag_number.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  flag_number.kv<uint32_t>("tokenizer.ggml.add_bos_token", 4, 1);
  expect_error([&] { tokenizer_data_from_gguf(parse(flag_number)); },
               "'tokenizer.ggml.add_bos_token'");
}

TEST(GgufTokenizer, BuildErrorsNameTheFile) {
  GgufWriter w;
  w.kv_string("tokenizer.ggml.model", "rwkv");
  w.raw_kv("tokenizer.ggml.tokens", 9, GgufWriter::string_array({"a"}));
  expect_error([&] { tokenizer_from_gguf(parse(w)); }, "tok.gguf: tokenizer: unsupported");
}

}  // namespace
}  // namespace iron::text
