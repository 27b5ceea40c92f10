// GGUF bytes -> GgufFile::parse, then every metadata getter on every key and every tensor.
#include "fuzz_util.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void gguf_reader(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    const io::GgufFile gguf = io::GgufFile::parse(in_memory(data, size));
    IRON_FUZZ_CHECK(gguf.data_offset() <= gguf.file()->size() || gguf.tensors().empty());
    touch(gguf);
  });
}

}  // namespace iron::fuzz
