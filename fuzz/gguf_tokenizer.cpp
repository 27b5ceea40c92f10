// GGUF bytes -> GgufFile -> tokenizer_from_gguf; the last bytes of the input are encoded as text.
#include "iron/io/gguf.hpp"
#include "targets.hpp"
#include "tokenizer_util.hpp"

namespace iron::fuzz {

void gguf_tokenizer(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    const io::GgufFile gguf = io::GgufFile::parse(in_memory(data, size));
    const text::Tokenizer tokenizer = text::tokenizer_from_gguf(gguf);
    const size_t tail = std::min<size_t>(size, 64);
    const std::string_view text(reinterpret_cast<const char*>(data) + size - tail, tail);
    exercise(tokenizer, text);
    exercise(tokenizer, "Hello world! <s></s><|im_start|> \xe2\x96\x81x \xff");
    exercise_chat(tokenizer, text);
  });
}

}  // namespace iron::fuzz
