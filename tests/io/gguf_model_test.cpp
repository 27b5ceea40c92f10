// The GGUF reader against real files: the stories260K test model (facts from SOURCES.md) and, when
// present, SmolLM2-135M quantised Q4_1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/io_test_util.hpp"
#include "iron/io/gguf.hpp"

namespace iron::io {
namespace {

using testing::expect_error;

TEST(GgufStories, HeaderFacts) {
  IRON_NEEDS_STORIES();
  GgufFile gguf = GgufFile::open(testing::stories_path());
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.tensors().size(), 48u);
  EXPECT_EQ(gguf.metadata().size(), 19u);
  EXPECT_EQ(gguf.alignment(), 32u);
  EXPECT_EQ(gguf.data_offset(), 14176u);
  EXPECT_EQ(gguf.find("general.alignment"), nullptr);
  // Metadata is kept in file order.
  EXPECT_EQ(gguf.metadata().front().key, "tokenizer.ggml.tokens");
  EXPECT_EQ(gguf.metadata().back().key, "llama.attention.layer_norm_rms_epsilon");
}

TEST(GgufStories, ModelHyperparameters) {
  IRON_NEEDS_STORIES();
  GgufFile gguf = GgufFile::open(testing::stories_path());
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(gguf.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(gguf.get_int("llama.block_count"), 5);
  EXPECT_EQ(gguf.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(gguf.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(gguf.get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(gguf.get_int("llama.context_length"), 2048);
  EXPECT_NEAR(*gguf.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-10);
  EXPECT_FALSE(gguf.get_float("llama.rope.freq_base").has_value());
  EXPECT_EQ(gguf.find("llama.attention.layer_norm_rms_epsilon")->type(), GgufType::f32);
}

TEST(GgufStories, Tokenizer) {
  IRON_NEEDS_STORIES();
  GgufFile gguf = GgufFile::open(testing::stories_path());
  EXPECT_EQ(gguf.get_string("tokenizer.ggml.model"), "llama");
  std::vector<std::string> tokens = gguf.get_strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  std::vector<float> scores = gguf.get_floats("tokenizer.ggml.scores");
  ASSERT_EQ(scores.size(), 512u);
  EXPECT_EQ(scores[511], -252.0f);
  std::vector<int32_t> types = gguf.get_ints("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 2);  // unknown
  EXPECT_EQ(types[1], 3);  // control
  EXPECT_EQ(types[3], 6);  // byte
  EXPECT_EQ(types[511], 1);
  EXPECT_EQ(gguf.get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(gguf.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(gguf.get_int("tokenizer.ggml.eos_token_id"), 2);
  // The converter's misspelling is the key the file holds.
  EXPECT_EQ(gguf.get_int("tokenizer.ggml.seperator_token_id"), 4294967295);
  EXPECT_FALSE(gguf.get_int("tokenizer.ggml.separator_token_id").has_value());
  EXPECT_FALSE(gguf.get_bool("tokenizer.ggml.add_bos_token").has_value());
  EXPECT_TRUE(gguf.get_strings("tokenizer.ggml.merges").empty());
}

TEST(GgufStories, WrongTypeNamesKeyAndBothTypes) {
  IRON_NEEDS_STORIES();
  GgufFile gguf = GgufFile::open(testing::stories_path());
  expect_error([&] { gguf.get_string("llama.block_count"); },
               "'llama.block_count' holds u32, not string");
  expect_error([&] { gguf.get_ints("tokenizer.ggml.tokens"); }, "holds array of string");
  expect_error([&] { gguf.get_strings("tokenizer.ggml.scores"); },
               "array of f32, not array of string");
  expect_error([&] { gguf.get_int("general.name"); }, "holds string, not an integer");
  expect_error([&] { gguf.get_bool("llama.block_count"); }, "stories260K.gguf");
}

TEST(GgufStories, TensorTable) {
  IRON_NEEDS_STORIES();
  GgufFile gguf = GgufFile::open(testing::stories_path());
  const auto& tensors = gguf.tensors();
  EXPECT_EQ(tensors[0].name, "token_embd.weight");
  EXPECT_EQ(tensors[0].dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(tensors[0].shape(), (Shape{512, 64}));
  EXPECT_EQ(tensors[0].offset, 14176u);
  EXPECT_EQ(tensors[0].nbytes, 131072);
  EXPECT_EQ(tensors[1].name, "output_norm.weight");
  EXPECT_EQ(tensors[2].name, "output.weight");
  uint64_t end = 0;
  for (const auto& t : tensors) {
    EXPECT_EQ(t.ggml_type, 0u) << t.name;
    EXPECT_EQ(t.dtype, DType::f32) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    end = std::max(end, t.offset + uint64_t(t.nbytes));
  }
  EXPECT_EQ(end, gguf.file()->size());  // data ends exactly at EOF
  struct Expected {
    const char* suffix;
    std::vector<int64_t> dims;
  };
  const std::vector<Expected> block = {
      {"attn_q", {64, 64}},      {"attn_k", {64, 32}},  {"attn_v", {64, 32}},
      {"attn_output", {64, 64}}, {"attn_norm", {64}},   {"ffn_gate", {64, 172}},
      {"ffn_down", {172, 64}},   {"ffn_up", {64, 172}}, {"ffn_norm", {64}}};
  for (int n = 0; n < 5; ++n)
    for (const auto& e : block) {
      std::string name = "blk." + std::to_string(n) + "." + e.suffix + ".weight";
      const GgufTensorInfo* info = gguf.find_tensor(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->dims, e.dims) << name;
    }
}

TEST(GgufStories, TensorsBorrowTheMapping) {
  IRON_NEEDS_STORIES();
  Tensor embedding, output, q;
  const uint8_t* base = nullptr;
  {
    GgufFile gguf = GgufFile::open(testing::stories_path());
    base = gguf.file()->data();
    embedding = gguf.tensor("token_embd.weight");
    output = gguf.tensor("output.weight");
    q = gguf.tensor("blk.0.attn_q.weight");
    EXPECT_EQ(embedding.data(), base + 14176);  // a view, not a copy
    expect_error([&] { gguf.tensor("blk.9.attn_q.weight"); },
                 "no tensor named 'blk.9.attn_q.weight'", ErrorKind::index);
  }
  // The GgufFile is gone; the views keep the mapping alive.
  EXPECT_EQ(embedding.shape(), (Shape{512, 64}));
  EXPECT_EQ(embedding.dtype(), DType::f32);
  EXPECT_EQ(q.shape(), (Shape{64, 64}));
  ASSERT_EQ(output.nbytes(), embedding.nbytes());
  EXPECT_EQ(std::memcmp(output.data(), embedding.data(), size_t(embedding.nbytes())), 0);
  for (float v : q.to_floats()) ASSERT_TRUE(std::isfinite(v));
  expect_error([&] { embedding.rows(0, 1).mutable_data(); }, "read-only");
}

// ---- SmolLM2-135M-Instruct Q4_1 (optional: a git-ignored symlink) ----

class GgufSmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!std::filesystem::exists(path_)) GTEST_SKIP() << path_ << " is absent";
  }
  std::string path_;
};

TEST_F(GgufSmolLM2, HeaderAndTokenizer) {
  GgufFile gguf = GgufFile::open(path_);
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.tensors().size(), 272u);
  EXPECT_EQ(gguf.get_int("llama.block_count"), 30);
  EXPECT_EQ(gguf.get_int("llama.embedding_length"), 576);
  EXPECT_EQ(gguf.get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(gguf.get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(gguf.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(gguf.get_bool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_EQ(gguf.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(gguf.get_strings("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(gguf.get_strings("tokenizer.ggml.merges").size(), 48900u);
  EXPECT_EQ(gguf.get_ints("tokenizer.ggml.token_type").size(), 49152u);
  EXPECT_EQ(gguf.get_strings("general.languages"), std::vector<std::string>{"en"});
  EXPECT_NE(gguf.get_string("tokenizer.chat_template")->find("<|im_start|>"), std::string::npos);
}

TEST_F(GgufSmolLM2, QuantisedTensors) {
  GgufFile gguf = GgufFile::open(path_);
  Tensor embedding = gguf.tensor("token_embd.weight");
  EXPECT_EQ(embedding.dtype(), DType::q8_0);
  EXPECT_EQ(embedding.shape(), (Shape{49152, 576}));
  Tensor down = gguf.tensor("blk.0.ffn_down.weight");  // ggml 1536x576
  EXPECT_EQ(down.dtype(), DType::q4_1);
  EXPECT_EQ(down.shape(), (Shape{576, 1536}));
  EXPECT_EQ(gguf.find_tensor("blk.0.ffn_down.weight")->nbytes, 576 / 32 * 1536 * 20);
  int q4_1 = 0;
  for (const auto& t : gguf.tensors()) q4_1 += t.dtype == DType::q4_1;
  EXPECT_EQ(q4_1, 30 * 7);

  // Dequantise one row of each: finite, not all zero.
  for (const Tensor& t : {embedding, down}) {
    Tensor row = t.rows(7, 8);
    std::vector<float> values(size_t(row.numel()));
    to_f32(row.dtype(), row.data(), values.data(), row.numel());
    double magnitude = 0;
    for (float v : values) {
      ASSERT_TRUE(std::isfinite(v));
      magnitude += std::fabs(v);
    }
    EXPECT_GT(magnitude, 0.0);
  }
}

// Cuts every 997 bytes through the 1.78 MB header (tokenizer arrays included) and a few through
// the data: each prefix must be refused with an error naming the file, never a crash.
TEST_F(GgufSmolLM2, TruncatedFileAlwaysThrows) {
  auto whole = MappedFile::open(path_);
  const uint64_t data_offset = GgufFile::parse(whole).data_offset();
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut < data_offset + 997; cut += 997) cuts.push_back(cut);
  for (size_t cut : {data_offset + 30081023, whole->size() / 2, whole->size() - 1})
    cuts.push_back(cut);
  for (size_t cut : cuts) {
    auto prefix = MappedFile::from_bytes("smol.gguf",
                                         std::vector<uint8_t>(whole->data(), whole->data() + cut));
    try {
      GgufFile::parse(prefix);
      ADD_FAILURE() << "a prefix of " << cut << " bytes parsed";
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("smol.gguf: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace iron::io
