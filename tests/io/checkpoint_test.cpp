// open_checkpoint and StateDict: either format, recognised by its bytes, as named tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/io/gguf.hpp"

namespace iron {
namespace {

using io::testing::expect_error;

TEST(Checkpoint, OpensGgufWithFileNamesInFileOrder) {
  IRON_NEEDS_STORIES();
  StateDict state = open_checkpoint(io::testing::stories_path());
  ASSERT_EQ(state.size(), 48u);
  EXPECT_EQ(state.items().front().first, "token_embd.weight");
  EXPECT_TRUE(state.contains("blk.4.ffn_norm.weight"));
  EXPECT_FALSE(state.contains("model.layers.0.self_attn.q_proj.weight"));
  const Tensor& q = state.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape(), (Shape{64, 64}));
  EXPECT_EQ(state.at("blk.0.ffn_down.weight").shape(), (Shape{64, 172}));
  const Tensor& embedding = state.at("token_embd.weight");
  const Tensor& output = state.at("output.weight");
  EXPECT_EQ(std::memcmp(embedding.data(), output.data(), size_t(output.nbytes())), 0);
  expect_error([&] { state.at("blk.5.attn_q.weight"); }, "no tensor named 'blk.5.attn_q.weight'",
               ErrorKind::index);
}

TEST(Checkpoint, RecognisesFormatsByContentNotExtension) {
  std::vector<uint8_t> floats = io::testing::as_bytes(std::vector<float>{1.0f, 2.0f});
  std::string safetensors = io::testing::write_temp_file(
      "weights.gguf",
      io::testing::safetensors_bytes(
          R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", floats));
  StateDict from_safetensors = open_checkpoint(safetensors);
  ASSERT_EQ(from_safetensors.size(), 1u);
  EXPECT_EQ(from_safetensors.at("w").to_floats(), (std::vector<float>{1.0f, 2.0f}));

  std::string gguf = io::testing::write_temp_file(
      "weights.safetensors", io::testing::GgufWriter().tensor("w", {2}, 0, floats).build());
  EXPECT_EQ(open_checkpoint(gguf).at("w").to_floats(), (std::vector<float>{1.0f, 2.0f}));

  std::string text = io::testing::write_temp_file("notes.txt", {'h', 'e', 'l', 'l', 'o'});
  expect_error([&] { open_checkpoint(text); }, "notes.txt: not a GGUF or safetensors checkpoint");
  expect_error([&] { open_checkpoint("/nonexistent/model.gguf"); }, "cannot open", ErrorKind::io);
}

TEST(Checkpoint, RefusesTensorTypesItCannotHold) {
  std::string path = io::testing::write_temp_file(
      "q3k.gguf",
      io::testing::GgufWriter().tensor("w", {256}, 11, std::vector<uint8_t>(110)).build());
  expect_error([&] { open_checkpoint(path); }, "ggml type Q3_K");
}

TEST(StateDict, InsertRefusesDuplicates) {
  StateDict state;
  state.insert("a.weight", Tensor::from({1.0f}, {1}));
  state.insert("b.weight", Tensor::from({2.0f}, {1}));
  expect_error([&] { state.insert("a.weight", Tensor::from({3.0f}, {1})); },
               "already holds a tensor named 'a.weight'");
  EXPECT_EQ(state.size(), 2u);
  EXPECT_EQ(state.items()[1].first, "b.weight");
  EXPECT_EQ(state.at("a.weight").item(), 1.0f);
}

}  // namespace
}  // namespace iron
