// The GGUF reader against generated files (every value type, v2 and v3, several tensor types) and
// against malformed input, which must always give an iron::Error naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "io/io_test_util.hpp"
#include "iron/io/gguf.hpp"

namespace iron::io {
namespace {

using testing::Bytes;
using testing::expect_error;
using testing::GgufWriter;

GgufFile parse_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "t.gguf") {
  return GgufFile::parse(MappedFile::from_bytes(name, bytes));
}

// Writes every value type, plain and as arrays, then tensors of four types (alignment 64).
std::vector<uint8_t> every_type_file(uint32_t version) {
  GgufWriter w(version, 64);
  w.kv<uint8_t>("u8", 0, 200)
      .kv<int8_t>("i8", 1, -5)
      .kv<uint16_t>("u16", 2, 60000)
      .kv<int16_t>("i16", 3, -300)
      .kv<uint32_t>("u32", 4, 4000000000u)
      .kv<int32_t>("i32", 5, -7)
      .kv<float>("f32", 6, 1.5f)
      .kv<uint8_t>("bool", 7, 1)
      .kv_string("string", "h\xc3\xa9llo")
      .kv<uint64_t>("u64", 10, uint64_t(1) << 40)
      .kv<int64_t>("i64", 11, -(int64_t(1) << 40))
      .kv<double>("f64", 12, 2.25)
      .kv<uint32_t>("general.alignment", 4, 64)
      .raw_kv("a.u8", 9, GgufWriter::array<uint8_t>(0, {1, 2, 255}))
      .raw_kv("a.i8", 9, GgufWriter::array<int8_t>(1, {-1, 2}))
      .raw_kv("a.u16", 9, GgufWriter::array<uint16_t>(2, {65535}))
      .raw_kv("a.i16", 9, GgufWriter::array<int16_t>(3, {-2}))
      .raw_kv("a.u32", 9, GgufWriter::array<uint32_t>(4, {7, 8}))
      .raw_kv("a.i32", 9, GgufWriter::array<int32_t>(5, {-3, 4}))
      .raw_kv("a.f32", 9, GgufWriter::array<float>(6, {0.5f, -1.0f}))
      .raw_kv("a.bool", 9, GgufWriter::array<uint8_t>(7, {1, 0, 1}))
      .raw_kv("a.string", 9, GgufWriter::string_array({"x", "", "yz"}))
      .raw_kv("a.u64", 9, GgufWriter::array<uint64_t>(10, {uint64_t(1) << 63}))
      .raw_kv("a.i64", 9, GgufWriter::array<int64_t>(11, {-9, 9}))
      .raw_kv("a.f64", 9, GgufWriter::array<double>(12, {0.25}))
      .raw_kv("a.empty", 9, GgufWriter::array<uint8_t>(0, {}))
      .raw_kv("a.nested", 9,
              GgufWriter::nested_array(
                  {GgufWriter::array<int32_t>(5, {1, 2}), GgufWriter::string_array({"deep"})}));
  std::vector<uint16_t> f16_values, bf16_values;
  for (float v : {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f}) {
    f16_values.push_back(f32_to_f16(v));
    bf16_values.push_back(f32_to_bf16(v));
  }
  Bytes q8;  // one Q8_0 block: scale 0.5, values i - 16
  q8.put<uint16_t>(f32_to_f16(0.5f));
  for (int i = 0; i < 32; ++i) q8.put<int8_t>(int8_t(i - 16));
  Bytes q4;  // one Q4_0 block: scale 2, low nibble i % 16, high nibble 15 - i % 16
  q4.put<uint16_t>(f32_to_f16(2.0f));
  for (int i = 0; i < 16; ++i) q4.put<uint8_t>(uint8_t(i | ((15 - i) << 4)));
  w.tensor("f16", {3, 2}, 1, testing::as_bytes(f16_values))
      .tensor("bf16", {6}, 30, testing::as_bytes(bf16_values))
      .tensor("q8", {32}, 8, q8.data)
      .tensor("q4", {32, 1}, 2, q4.data);
  return w.build();
}

class GgufEveryType : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufEveryType, ReadsEveryMetadataType) {
  GgufFile gguf = parse_bytes(every_type_file(GetParam()));
  EXPECT_EQ(gguf.version(), GetParam());
  EXPECT_EQ(gguf.get_int("u8"), 200);
  EXPECT_EQ(gguf.get_int("i8"), -5);
  EXPECT_EQ(gguf.get_int("u16"), 60000);
  EXPECT_EQ(gguf.get_int("i16"), -300);
  EXPECT_EQ(gguf.get_int("u32"), 4000000000);
  EXPECT_EQ(gguf.get_int("i32"), -7);
  EXPECT_EQ(gguf.get_float("f32"), 1.5);
  EXPECT_EQ(gguf.get_bool("bool"), true);
  EXPECT_EQ(gguf.get_string("string"), "h\xc3\xa9llo");
  EXPECT_EQ(gguf.get_int("u64"), int64_t(1) << 40);
  EXPECT_EQ(gguf.get_int("i64"), -(int64_t(1) << 40));
  EXPECT_EQ(gguf.get_float("f64"), 2.25);
  EXPECT_EQ(gguf.get_float("u32"), 4e9);  // integers widen to floats
  EXPECT_EQ(gguf.find("i16")->type(), GgufType::i16);

  EXPECT_EQ(gguf.get_ints("a.u8"), (std::vector<int32_t>{1, 2, 255}));
  EXPECT_EQ(gguf.get_ints("a.i8"), (std::vector<int32_t>{-1, 2}));
  EXPECT_EQ(gguf.get_ints("a.u16"), (std::vector<int32_t>{65535}));
  EXPECT_EQ(gguf.get_ints("a.i16"), (std::vector<int32_t>{-2}));
  EXPECT_EQ(gguf.get_ints("a.u32"), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(gguf.get_ints("a.i32"), (std::vector<int32_t>{-3, 4}));
  EXPECT_EQ(gguf.get_ints("a.i64"), (std::vector<int32_t>{-9, 9}));
  EXPECT_EQ(gguf.get_floats("a.f32"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(gguf.get_floats("a.f64"), (std::vector<float>{0.25f}));
  EXPECT_EQ(gguf.get_strings("a.string"), (std::vector<std::string>{"x", "", "yz"}));
  const auto& bools = std::get<GgufArray>(gguf.find("a.bool")->value);
  EXPECT_EQ(std::get<std::vector<bool>>(bools.items), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(std::get<GgufArray>(gguf.find("a.u64")->value).element_type(), GgufType::u64);
  EXPECT_EQ(std::get<GgufArray>(gguf.find("a.empty")->value).size(), 0u);
  expect_error([&] { gguf.get_ints("a.u64"); }, "does not fit in int32");

  const GgufValue* nested = gguf.find("a.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->type_name(), "array of array");
  const auto& inner = std::get<std::vector<GgufArray>>(std::get<GgufArray>(nested->value).items);
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(inner[0].items), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(std::get<std::vector<std::string>>(inner[1].items), std::vector<std::string>{"deep"});

  // File order is kept.
  std::vector<std::string> keys;
  for (const auto& kv : gguf.metadata()) keys.push_back(kv.key);
  EXPECT_EQ(keys.front(), "u8");
  EXPECT_EQ(keys[12], "general.alignment");
  EXPECT_EQ(keys.back(), "a.nested");
}

TEST_P(GgufEveryType, ReadsTensorsAtTheFileAlignment) {
  GgufFile gguf = parse_bytes(every_type_file(GetParam()));
  EXPECT_EQ(gguf.alignment(), 64u);
  EXPECT_EQ(gguf.data_offset() % 64, 0u);
  for (const auto& t : gguf.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;

  Tensor f16 = gguf.tensor("f16");
  EXPECT_EQ(f16.dtype(), DType::f16);
  EXPECT_EQ(f16.shape(), (Shape{2, 3}));
  EXPECT_EQ(f16.to_floats(), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f}));
  Tensor bf16 = gguf.tensor("bf16");
  EXPECT_EQ(bf16.dtype(), DType::bf16);
  EXPECT_EQ(bf16.to_floats(), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.0f, -0.25f}));

  Tensor q8 = gguf.tensor("q8");
  EXPECT_EQ(q8.dtype(), DType::q8_0);
  EXPECT_EQ(q8.nbytes(), 34);
  std::vector<float> q8_values = q8.to_floats();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q8_values[size_t(i)], 0.5f * float(i - 16));

  Tensor q4 = gguf.tensor("q4");
  EXPECT_EQ(q4.shape(), (Shape{1, 32}));
  std::vector<float> q4_values = q4.to_floats();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(q4_values[size_t(i)], 2.0f * float(i - 8));
    EXPECT_EQ(q4_values[size_t(i + 16)], 2.0f * float(15 - i - 8));
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufEveryType, ::testing::Values(2u, 3u));

TEST(GgufFormat, ListsTypesIronCannotLoadButRefusesThem) {
  std::vector<uint8_t> q3k(110, 0), odd(8, 0);
  GgufFile gguf =
      parse_bytes(GgufWriter().tensor("q3k", {256}, 11, q3k).tensor("new", {8}, 99, odd).build());
  ASSERT_EQ(gguf.tensors().size(), 2u);
  EXPECT_FALSE(gguf.tensors()[0].dtype.has_value());
  EXPECT_EQ(gguf.tensors()[0].nbytes, 110);
  EXPECT_EQ(gguf.tensors()[1].nbytes, -1);  // unknown layout
  expect_error([&] { gguf.tensor("q3k"); }, "ggml type Q3_K (id 11)");
  expect_error([&] { gguf.tensor("new"); }, "ggml type type 99");
}

TEST(GgufFormat, MisalignedDataIsCopiedNotReadMisaligned) {
  // Alignment 1 puts an f32 tensor at an odd address; the reader hands back an aligned copy.
  std::vector<uint8_t> one = {7};
  GgufWriter w(3, 1);
  w.kv<uint32_t>("general.alignment", 4, 1)
      .tensor("bytes", {1}, 24, one)
      .tensor("floats", {2}, 0, testing::as_bytes(std::vector<float>{1.5f, -2.5f}));
  GgufFile gguf = parse_bytes(w.build());
  ASSERT_NE(gguf.find_tensor("floats")->offset % 4, 0u);  // the case under test
  EXPECT_EQ(gguf.tensor("bytes").to_ints(), std::vector<int32_t>{7});
  Tensor floats = gguf.tensor("floats");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(floats.data()) % 4, 0u);
  EXPECT_EQ(floats.to_floats(), (std::vector<float>{1.5f, -2.5f}));
}

TEST(GgufFormat, EmptyFileAndOpenErrors) {
  std::string empty = testing::write_temp_file("empty.gguf", {});
  auto mapped = MappedFile::open(empty);
  EXPECT_EQ(mapped->size(), 0u);
  EXPECT_NE(mapped->data(), nullptr);
  expect_error([&] { GgufFile::open(empty); }, "empty.gguf: file is truncated");
  expect_error([&] { GgufFile::open("/nonexistent/x.gguf"); },
               "/nonexistent/x.gguf: cannot open: No such file", ErrorKind::io);
  expect_error([&] { MappedFile::open("/tmp"); }, "not a regular file", ErrorKind::io);
}

// ---- malformed input ----

TEST(GgufMalformed, HeaderProblems) {
  std::vector<uint8_t> good = GgufWriter().kv<uint32_t>("k", 4, 1).build();
  auto with = [&](size_t at, std::vector<uint8_t> patch) {
    std::vector<uint8_t> bytes = good;
    std::copy(patch.begin(), patch.end(), bytes.begin() + long(at));
    return bytes;
  };
  expect_error([&] { parse_bytes(with(0, {'G', 'G', 'U', 'X'})); }, "t.gguf: not a GGUF file");
  expect_error([&] { parse_bytes(with(4, {1, 0, 0, 0})); }, "GGUF version 1 is not supported");
  expect_error([&] { parse_bytes(with(4, {4, 0, 0, 0})); }, "GGUF version 4 is not supported");
  expect_error([&] { parse_bytes(with(4, {0, 0, 0, 3})); }, "big-endian");
  expect_error([&] { parse_bytes(with(8, Bytes().put<uint64_t>(1ull << 60).data)); },
               "claims 1152921504606846976 tensors");
  expect_error([&] { parse_bytes(with(16, Bytes().put<uint64_t>(1ull << 60).data)); },
               "claims 1152921504606846976 metadata keys");
  expect_error([&] { parse_bytes(with(24, Bytes().put<uint64_t>(1ull << 60).data)); },
               "metadata key 0 needs 1152921504606846976 bytes");
  expect_error([&] { parse_bytes(with(33, {13, 0, 0, 0})); }, "'k' has unknown value type 13");
}

TEST(GgufMalformed, ValueProblems) {
  expect_error([&] { parse_bytes(GgufWriter().kv<uint8_t>("b", 7, 2).build()); },
               "'b' holds bool byte 2");
  expect_error(
      [&] { parse_bytes(GgufWriter().kv<uint8_t>("k", 0, 1).kv<uint8_t>("k", 0, 2).build()); },
      "metadata key 'k' appears twice");
  Bytes huge_strings;  // an array claiming 2^60 strings must fail before allocating
  huge_strings.put<uint32_t>(8).put<uint64_t>(1ull << 60);
  expect_error([&] { parse_bytes(GgufWriter().raw_kv("s", 9, huge_strings.data).build()); },
               "'s' claims 1152921504606846976 string elements");
  Bytes long_string;  // one string claiming 2^60 bytes
  long_string.put<uint32_t>(8).put<uint64_t>(1).put<uint64_t>(1ull << 60);
  expect_error([&] { parse_bytes(GgufWriter().raw_kv("s", 9, long_string.data).build()); },
               "'s' needs 1152921504606846976 bytes");
  std::vector<uint8_t> deep = GgufWriter::array<uint8_t>(0, {1});
  for (int level = 0; level < 9; ++level) deep = GgufWriter::nested_array({deep});
  expect_error([&] { parse_bytes(GgufWriter().raw_kv("deep", 9, deep).build()); },
               "'deep' nests arrays deeper than 8");
  std::vector<uint8_t> ok = GgufWriter::array<uint8_t>(0, {1});
  for (int level = 0; level < 7; ++level) ok = GgufWriter::nested_array({ok});
  EXPECT_NO_THROW(parse_bytes(GgufWriter().raw_kv("ok", 9, ok).build()));
  expect_error(
      [&] { parse_bytes(GgufWriter().kv<uint64_t>("big", 10, ~0ull).build()).get_int("big"); },
      "too large for int64");
}

TEST(GgufMalformed, AlignmentProblems) {
  for (uint32_t bad : {0u, 48u, 3u})
    expect_error(
        [&] { parse_bytes(GgufWriter().kv<uint32_t>("general.alignment", 4, bad).build()); },
        "general.alignment " + std::to_string(bad) + " is not a nonzero power of two");
  expect_error([&] { parse_bytes(GgufWriter().kv_string("general.alignment", "32").build()); },
               "'general.alignment' holds string, not an integer");
}

TEST(GgufMalformed, TensorProblems) {
  std::vector<uint8_t> f32x8(32, 0);
  auto one = [&](std::vector<uint64_t> dims, uint32_t type,
                 std::optional<uint64_t> offset = std::nullopt) {
    return parse_bytes(GgufWriter().tensor("w", dims, type, f32x8, offset).build(), "x.gguf");
  };
  expect_error([&] { one({8}, 0, 8); },
               "x.gguf: tensor 'w' data offset 8 is not a multiple of the alignment 32");
  expect_error([&] { one({8}, 0, 64); }, "x.gguf: tensor 'w' data [");
  expect_error([&] { one({16}, 0); }, ") runs past the end of the file (size ");
  expect_error([&] { one({1ull << 62}, 0); }, "tensor 'w' is too large: its byte size overflows");
  expect_error([&] { one({2, 2, 2, 1, 1}, 0); }, "tensor 'w' has rank 5 (must be 1 to 4)");
  expect_error([&] { one({}, 0); }, "tensor 'w' has rank 0");
  expect_error([&] { one({8, 0}, 0); }, "dimension 1 = 0");
  expect_error([&] { one({1ull << 32, 1ull << 32}, 0); }, "element count overflow");
  expect_error([&] { one({16}, 8); }, "ne0 = 16, not a multiple of the Q8_0 block size 32");
  expect_error([&] { one({1ull << 59}, 8); }, "runs past the end of the file");
  // The 5-bit kinds: a partial block or a block past the 32 bytes held is refused by name.
  expect_error([&] { one({16}, 6); }, "ne0 = 16, not a multiple of the Q5_0 block size 32");
  expect_error([&] { one({128}, 13); }, "ne0 = 128, not a multiple of the Q5_K block size 256");
  expect_error([&] { one({32, 2}, 7); }, "runs past the end of the file");
  expect_error([&] { one({8}, 0, (1ull << 63) + 32); }, "runs past the end of the file");
  expect_error([&] { one({8}, 0, ~0ull - 31); }, "runs past the end of the file");  // wraps
  expect_error(
      [&] {
        parse_bytes(GgufWriter().tensor("w", {8}, 0, f32x8).tensor("w", {8}, 0, f32x8).build());
      },
      "tensor 'w' appears twice");
}

// Every prefix of a real file must be refused with an iron::Error, never a crash or a huge
// allocation; exact-size copies let a sanitizer catch any read past the end.
TEST(GgufMalformed, TruncatedRealFileAlwaysThrows) {
  IRON_NEEDS_STORIES();
  std::vector<uint8_t> whole = testing::read_bytes(testing::stories_path());
  ASSERT_EQ(whole.size(), 1185376u);
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut < 14176 + 100; cut += 97) cuts.push_back(cut);
  for (size_t cut = 14176 + 100; cut < whole.size(); cut += 99991) cuts.push_back(cut);
  cuts.push_back(whole.size() - 1);
  for (size_t cut : cuts) {
    std::vector<uint8_t> prefix(whole.begin(), whole.begin() + long(cut));
    try {
      parse_bytes(prefix, "cut.gguf");
      ADD_FAILURE() << "a prefix of " << cut << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.gguf: ", 0), 0u) << e.what();
    }
  }
  // Through the file system too.
  std::string path = testing::write_temp_file(
      "cut.gguf", std::vector<uint8_t>(whole.begin(), whole.begin() + 20000));
  expect_error([&] { GgufFile::open(path); }, "runs past the end of the file (size 20000)");
}

TEST(GgufMalformed, CorruptedStringLengthsInRealFile) {
  IRON_NEEDS_STORIES();
  std::vector<uint8_t> whole = testing::read_bytes(testing::stories_path());
  // Key 0 is "tokenizer.ggml.tokens" (21 bytes) at offset 24: its array type is at 57, the count
  // at 61 and the first string's length at 69.
  auto patched = [&](size_t at, uint64_t value) {
    std::vector<uint8_t> bytes = whole;
    std::memcpy(bytes.data() + at, &value, 8);
    return bytes;
  };
  expect_error([&] { parse_bytes(patched(24, ~0ull)); },
               "metadata key 0 needs 18446744073709551615 bytes");
  expect_error([&] { parse_bytes(patched(61, 1ull << 60)); },
               "claims 1152921504606846976 string elements");
  expect_error([&] { parse_bytes(patched(69, 1ull << 40)); },
               "'tokenizer.ggml.tokens' needs 1099511627776 bytes");
}

// Random single-byte corruptions of the real header: each parse either fails with iron::Error or
// yields a file whose every tensor can be read without leaving the mapping.
TEST(GgufMalformed, CorruptedHeaderBytesNeverCrash) {
  IRON_NEEDS_STORIES();
  std::vector<uint8_t> whole = testing::read_bytes(testing::stories_path());
  uint64_t state = 0x9e3779b97f4a7c15ull;  // a fixed xorshift seed: failures reproduce
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> bytes = whole;
    bytes[next() % 14176] = uint8_t(next());
    try {
      GgufFile gguf = parse_bytes(bytes);
      for (const auto& t : gguf.tensors()) {
        if (!t.dtype) continue;
        std::vector<float> values = gguf.tensor(t.name).to_floats();
        ASSERT_EQ(int64_t(values.size()), t.numel);
      }
    } catch (const Error& e) {
      ++refused;
      ASSERT_EQ(std::string(e.what()).rfind("t.gguf: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace iron::io
