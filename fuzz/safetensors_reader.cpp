// safetensors bytes -> SafetensorsFile::parse, then every tensor; and the bytes as the JSON
// header of a file with a small data section (so the fuzzer mutates the header directly).
#include "fuzz_util.hpp"
#include "iron/io/safetensors.hpp"
#include "targets.hpp"

namespace iron::fuzz {
namespace {

void walk(const io::SafetensorsFile& file) {
  uint64_t sum = file.data_offset();
  IRON_FUZZ_CHECK(file.data_offset() <= file.file()->size());
  for (const auto& [key, value] : file.metadata()) sum += key.size() + value.size();
  for (const io::SafetensorsTensorInfo& info : file.tensors()) {
    IRON_FUZZ_CHECK(file.find_tensor(info.name) == &info);
    IRON_FUZZ_CHECK(info.offset >= file.data_offset());
    IRON_FUZZ_CHECK(info.offset <= file.file()->size() &&
                    info.nbytes <= file.file()->size() - info.offset);
    expect_ok_or_error([&] {
      Tensor t = file.tensor(info.name);
      IRON_FUZZ_CHECK(t.shape() == info.shape);
      IRON_FUZZ_CHECK(uint64_t(t.nbytes()) == info.nbytes);
      sum += touch(t);
    });
  }
  (void)sum;
}

}  // namespace

void safetensors_reader(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] { walk(io::SafetensorsFile::parse(in_memory(data, size))); });

  // The input as the header: its length, the header, then 256 bytes of data.
  std::vector<uint8_t> file(8);
  const uint64_t header_size = size;
  std::memcpy(file.data(), &header_size, 8);
  file.insert(file.end(), data, data + size);
  for (int i = 0; i < 256; ++i) file.push_back(uint8_t(i));
  expect_ok_or_error([&] {
    walk(io::SafetensorsFile::parse(io::MappedFile::from_bytes("fuzz-header", std::move(file))));
  });
}

}  // namespace iron::fuzz
