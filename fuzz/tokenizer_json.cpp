// Bytes as tokenizer.json (and, after a NUL byte, tokenizer_config.json next to it) ->
// read_hf_tokenizer_json -> Tokenizer::build -> encode and decode a fixed text.
#include "targets.hpp"
#include "tokenizer_util.hpp"

namespace iron::fuzz {

void tokenizer_json(const uint8_t* data, size_t size) {
  const auto [tokenizer_part, config_part] = split_at_nul(data, size);
  const std::string path = write_temp("tokenizer.json", tokenizer_part);
  if (config_part)
    write_temp("tokenizer_config.json", *config_part);
  else
    remove_temp("tokenizer_config.json");
  expect_ok_or_error([&] {
    const text::Tokenizer tokenizer = text::Tokenizer::build(text::read_hf_tokenizer_json(path));
    exercise(tokenizer,
             "Hello world! It's 2024: 12345 tokens.\n\n  <|im_start|>user\n\xc3\xa9\xe2\x82\xac"
             "\xf0\x9f\x98\x80 \xff\xfe<|im_end|> \t end");
    exercise_chat(tokenizer, "Hi there");
  });
}

}  // namespace iron::fuzz
