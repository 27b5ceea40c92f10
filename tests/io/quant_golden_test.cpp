// to_f32 of every block kind against PyPI gguf's dequantiser (gguf.quants.dequantize), value for
// value: on seeded random blocks of each kind, and (when models/gemma-3-270m-q4_k_m.gguf is
// present) on whole tensors of the Gemma 3 270M Q4_K_M file, one of each kind it holds. The
// expected values come from tests/golden/make_quant_golden.py (tests/golden/quant_blocks.json).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.hpp"
#include "iron/io/gguf.hpp"

namespace iron::io {
namespace {

nlohmann::json golden() {
  std::ifstream file(std::string(IRON_SOURCE_DIR) + "/tests/golden/quant_blocks.json");
  return nlohmann::json::parse(file);
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return bytes;
}

std::vector<float> floats_from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes = from_hex(hex);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// The script's checksum: sum_i bits(v_i) (2 i + 1) mod 2^64.
uint64_t checksum(const std::vector<float>& v) {
  uint64_t sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    sum += uint64_t(bits) * (2 * uint64_t(i) + 1);
  }
  return sum;
}

DType dtype_of(const std::string& ggml_kind) {
  std::string lower;
  for (char c : ggml_kind) lower += char(std::tolower(static_cast<unsigned char>(c)));
  return dtype_from_name(lower);
}

TEST(QuantGolden, RandomBlocksOfEveryKindMatchGguf) {
  const nlohmann::json g = golden();
  ASSERT_EQ(g["blocks"].size(), 8u);
  for (const auto& [kind, entry] : g["blocks"].items()) {
    SCOPED_TRACE(kind);
    const DType t = dtype_of(kind);
    const std::vector<uint8_t> bytes = from_hex(entry["bytes"].get<std::string>());
    const std::vector<float> want = floats_from_hex(entry["values"].get<std::string>());
    ASSERT_EQ(storage_bytes(t, int64_t(want.size())), int64_t(bytes.size()));
    std::vector<float> got(want.size());
    to_f32(t, bytes.data(), got.data(), int64_t(got.size()));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
  }
}

TEST(QuantGolden, GemmaTensorsMatchGguf) {
  const std::string path = testing::local_model_path("gemma-3-270m-q4_k_m.gguf");
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (scripts/fetch-model.sh gemma3 fetches it)";
  GgufFile file = GgufFile::open(path);
  const nlohmann::json g = golden();
  ASSERT_EQ(g["gemma"].size(), 4u);
  for (const auto& [name, entry] : g["gemma"].items()) {
    SCOPED_TRACE(name);
    Tensor t = file.tensor(name);
    EXPECT_EQ(t.dtype(), dtype_of(entry["kind"].get<std::string>()));
    ASSERT_EQ(t.numel(), entry["elements"].get<int64_t>());
    const std::vector<float> got = t.to_floats();
    const std::vector<float> first = floats_from_hex(entry["first"].get<std::string>());
    for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(got[i], first[i]) << "element " << i;
    EXPECT_EQ(std::to_string(checksum(got)), entry["checksum"].get<std::string>());
  }
}

}  // namespace
}  // namespace iron::io
