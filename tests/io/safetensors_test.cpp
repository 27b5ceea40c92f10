// The safetensors reader and read_json_file against generated files, good and malformed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "iron/io/safetensors.hpp"

namespace iron::io {
namespace {

using testing::as_bytes;
using testing::expect_error;
using testing::safetensors_bytes;

SafetensorsFile parse_safetensors(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::parse(MappedFile::from_bytes("m.safetensors", bytes));
}

// Five tensors of the supported dtypes plus an F64 one, listed out of name order.
std::vector<uint8_t> sample_file(bool pad_header = true) {
  std::vector<uint8_t> data;
  auto add = [&](const std::vector<uint8_t>& bytes) {
    data.insert(data.end(), bytes.begin(), bytes.end());
  };
  add(as_bytes(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}));        // [0, 24)
  add(as_bytes(std::vector<uint16_t>{f32_to_f16(0.5f), f32_to_f16(-1.0f)}));    // [24, 28)
  add(as_bytes(std::vector<uint16_t>{f32_to_bf16(2.0f), f32_to_bf16(-3.0f)}));  // [28, 32)
  add(as_bytes(std::vector<int8_t>{-1, 2, -3, 4}));                             // [32, 36)
  add(as_bytes(std::vector<int32_t>{-100000, 7}));                              // [36, 44)
  add(as_bytes(std::vector<double>{0.5}));                                      // [44, 52)
  std::string header = R"({
    "z.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "__metadata__": {"format": "pt", "note": "test"},
    "a.half": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
    "m.brain": {"dtype": "BF16", "shape": [2], "data_offsets": [28, 32]},
    "b.bytes": {"dtype": "I8", "shape": [2, 2], "data_offsets": [32, 36]},
    "c.ints": {"dtype": "I32", "shape": [2], "data_offsets": [36, 44]},
    "d.double": {"dtype": "F64", "shape": [], "data_offsets": [44, 52]}})";
  return safetensors_bytes(header, data, pad_header);
}

TEST(Safetensors, ReadsTensorsInHeaderOrder) {
  SafetensorsFile file = parse_safetensors(sample_file());
  std::vector<std::string> names;
  for (const auto& t : file.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"z.weight", "a.half", "m.brain", "b.bytes", "c.ints",
                                             "d.double"}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.data_offset() % 8, 0u);

  Tensor weight = file.tensor("z.weight");
  EXPECT_EQ(weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(weight.data(), file.file()->data() + file.data_offset());  // borrowed
  EXPECT_EQ(weight.to_floats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(file.tensor("a.half").to_floats(), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(file.tensor("m.brain").to_floats(), (std::vector<float>{2.0f, -3.0f}));
  EXPECT_EQ(file.tensor("b.bytes").to_ints(), (std::vector<int32_t>{-1, 2, -3, 4}));
  EXPECT_EQ(file.tensor("c.ints").to_ints(), (std::vector<int32_t>{-100000, 7}));
  EXPECT_EQ(file.tensor("c.ints").dtype(), DType::i32);

  const SafetensorsTensorInfo* dbl = file.find_tensor("d.double");
  ASSERT_NE(dbl, nullptr);
  EXPECT_EQ(dbl->dtype_name, "F64");
  EXPECT_TRUE(dbl->shape.empty());
  EXPECT_EQ(dbl->nbytes, 8u);
  expect_error([&] { file.tensor("d.double"); },
               "tensor 'd.double' has dtype F64, which IRON cannot load");
  expect_error([&] { file.tensor("nope"); }, "m.safetensors: no tensor named 'nope'",
               ErrorKind::index);
}

TEST(Safetensors, UnpaddedHeaderStillGivesAlignedTensors) {
  SafetensorsFile file = parse_safetensors(sample_file(/*pad_header=*/false));
  ASSERT_NE(file.data_offset() % 4, 0u);  // the case under test
  Tensor weight = file.tensor("z.weight");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(weight.data()) % 4, 0u);
  EXPECT_EQ(weight.to_floats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Safetensors, OpensFromDiskAndTensorsOutliveTheFile) {
  std::string path = testing::write_temp_file("sample.safetensors", sample_file());
  Tensor ints;
  {
    SafetensorsFile file = SafetensorsFile::open(path);
    ints = file.tensor("c.ints");
  }
  EXPECT_EQ(ints.to_ints(), (std::vector<int32_t>{-100000, 7}));
  EXPECT_NO_THROW(parse_safetensors(safetensors_bytes("{}", {})));  // no tensors is fine
}

TEST(SafetensorsMalformed, HeaderProblems) {
  std::vector<uint8_t> short_file = {1, 2, 3};
  expect_error([&] { parse_safetensors(short_file); }, "too short for a safetensors header (3 bytes");
  std::vector<uint8_t> past = safetensors_bytes("{}", {});
  past[0] = 200;
  expect_error([&] { parse_safetensors(past); },
               "m.safetensors: header length 200 runs past the end of the file (size 16)");
  past[7] = 0xff;  // a length near 2^64 must not wrap
  expect_error([&] { parse_safetensors(past); }, "runs past the end of the file");
  expect_error([&] { parse_safetensors(safetensors_bytes(R"({"a": {"dtype": )", {})); },
               "header is not valid JSON");
  expect_error([&] { parse_safetensors(safetensors_bytes("[1, 2]", {})); },
               "header is not a JSON object");
  expect_error([&] { parse_safetensors(safetensors_bytes(R"({"__metadata__": {"n": 1}})", {})); },
               "__metadata__ entry 'n' is not a string");
  expect_error([&] { parse_safetensors(safetensors_bytes(R"({"__metadata__": []})", {})); },
               "__metadata__ is not an object");
}

TEST(SafetensorsMalformed, TensorEntryProblems) {
  std::vector<uint8_t> data(16, 0);
  auto parse_header = [&](const std::string& header) {
    parse_safetensors(safetensors_bytes(header, data));
  };
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}})"); },
      "tensor 't' has unknown dtype 'Q9'");
  expect_error([&] { parse_header(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})"); },
               "tensor 't' has no dtype");
  expect_error([&] { parse_header(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})"); },
               "has no shape");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})"); },
      "has no data_offsets pair");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})"); },
      "shape entry that is not a count: -1");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})"); },
      "not byte counts");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})"); },
      "hold 4 bytes but shape (2,) of F32 needs 8 (size mismatch)");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [5], "data_offsets": [0, 20]}})"); },
      "data_offsets [0, 20) fall outside the data section (16 bytes)");
  expect_error(
      [&] { parse_header(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})"); },
      "fall outside the data section");
  expect_error(
      [&] {
        parse_header(
            R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})");
      },
      "element count overflows");
  expect_error(
      [&] {
        parse_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})");
      },
      "tensors 'a' and 'b' overlap");
  expect_error(
      [&] {
        parse_header(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})");
      },
      "header names 'a' twice");
  // Empty tensors take no bytes, so they overlap nothing.
  EXPECT_NO_THROW(parse_header(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})"));
}

TEST(SafetensorsMalformed, TruncationAlwaysThrows) {
  std::vector<uint8_t> whole = sample_file();
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    std::vector<uint8_t> prefix(whole.begin(), whole.begin() + long(cut));
    EXPECT_THROW(parse_safetensors(prefix), Error) << cut;
  }
}

TEST(ReadJsonFile, ReadsAndRefuses) {
  std::string config = R"({"hidden_size": 384, "architectures": ["BertModel"]})";
  std::string good =
      testing::write_temp_file("config.json", std::vector<uint8_t>(config.begin(), config.end()));
  nlohmann::json json = read_json_file(good);
  EXPECT_EQ(json["hidden_size"].get<int>(), 384);
  EXPECT_EQ(json["architectures"][0].get<std::string>(), "BertModel");
  expect_error([&] { read_json_file(good, 10); }, "is over the 10-byte limit");
  std::string bad = testing::write_temp_file("bad.json", {'{', 'x'});
  expect_error([&] { read_json_file(bad); }, "bad.json: not valid JSON");
  expect_error([&] { read_json_file("/nonexistent/config.json"); },
               "/nonexistent/config.json: cannot open", ErrorKind::io);
}

}  // namespace
}  // namespace iron::io
