// The fuzz targets as plain functions, so the libFuzzer programs (fuzz/entry.cpp) and the
// regression tests (tests/fuzz_regressions_test.cpp) run the same code on an input. Each returns
// normally when the library accepts the input or refuses it with iron::Error; anything else it
// lets escape (another exception, InvariantBroken) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace iron::fuzz {

using Target = void (*)(const uint8_t* data, size_t size);

void gguf_reader(const uint8_t* data, size_t size);
void safetensors_reader(const uint8_t* data, size_t size);
void hf_config(const uint8_t* data, size_t size);
void gguf_config(const uint8_t* data, size_t size);
void tokenizer_json(const uint8_t* data, size_t size);
void gguf_tokenizer(const uint8_t* data, size_t size);
void tokenizer_encode(const uint8_t* data, size_t size);
void profile_json(const uint8_t* data, size_t size);
void chat_template(const uint8_t* data, size_t size);
void command_line(const uint8_t* data, size_t size);
void conversation_json(const uint8_t* data, size_t size);
void serve_request(const uint8_t* data, size_t size);

struct NamedTarget {
  std::string_view name;
  Target run;
};
inline constexpr NamedTarget kTargets[] = {
    {"gguf_reader", gguf_reader},
    {"safetensors_reader", safetensors_reader},
    {"hf_config", hf_config},
    {"gguf_config", gguf_config},
    {"tokenizer_json", tokenizer_json},
    {"gguf_tokenizer", gguf_tokenizer},
    {"tokenizer_encode", tokenizer_encode},
    {"profile_json", profile_json},
    {"chat_template", chat_template},
    {"command_line", command_line},
    {"conversation_json", conversation_json},
    {"serve_request", serve_request},
};

}  // namespace iron::fuzz
