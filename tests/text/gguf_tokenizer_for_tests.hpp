// TEMPORARY, for tests only: reads just the tokenizer.* metadata of a GGUF file into
// TokenizerData, so the tokenizer tests do not wait for the real GGUF reader (being written on
// another branch). Replace with the real reader once it is merged; it checks little and trusts
// the files it is given (the shared test models).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "iron/text/tokenizer.hpp"

namespace iron::text::testing {

class GgufTokenizerReader {
 public:
  explicit GgufTokenizerReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error("cannot open " + path);
  }

  TokenizerData read() {
    if (take_bytes(4) != "GGUF") throw std::runtime_error("not a GGUF file");
    const uint32_t version = take<uint32_t>();
    if (version < 2) throw std::runtime_error("GGUF version too old");
    take<uint64_t>();  // tensor count
    const uint64_t n_kv = take<uint64_t>();
    TokenizerData d;
    for (uint64_t i = 0; i < n_kv; ++i) {
      const std::string key = take_string();
      const uint32_t type = take<uint32_t>();
      if (key == "tokenizer.ggml.model") {
        d.model = take_string();
      } else if (key == "tokenizer.ggml.pre") {
        d.pre = take_string();
      } else if (key == "tokenizer.chat_template") {
        d.chat_template = take_string();
      } else if (key == "tokenizer.ggml.tokens") {
        d.tokens = take_string_array();
      } else if (key == "tokenizer.ggml.merges") {
        d.merges = take_string_array();
      } else if (key == "tokenizer.ggml.scores") {
        d.scores = take_array<float>(6);
      } else if (key == "tokenizer.ggml.token_type") {
        d.token_types = take_array<int32_t>(5);
      } else if (key == "tokenizer.ggml.bos_token_id") {
        d.bos_id = take_id(type);
      } else if (key == "tokenizer.ggml.eos_token_id") {
        d.eos_id = take_id(type);
      } else if (key == "tokenizer.ggml.unknown_token_id") {
        d.unk_id = take_id(type);
      } else if (key == "tokenizer.ggml.padding_token_id") {
        d.pad_id = take_id(type);
      } else if (key == "tokenizer.ggml.add_bos_token") {
        d.add_bos = take<uint8_t>() != 0;
      } else if (key == "tokenizer.ggml.add_space_prefix") {
        d.add_space_prefix = take<uint8_t>() != 0;
      } else {
        skip_value(type);
      }
    }
    return d;
  }

 private:
  template <class T>
  T take() {
    T v;
    in_.read(reinterpret_cast<char*>(&v), sizeof v);
    if (!in_) throw std::runtime_error("GGUF: truncated");
    return v;
  }
  std::string take_bytes(uint64_t n) {
    if (n > (uint64_t(1) << 30)) throw std::runtime_error("GGUF: string too long");
    std::string s(size_t(n), '\0');
    in_.read(s.data(), std::streamsize(n));
    if (!in_) throw std::runtime_error("GGUF: truncated");
    return s;
  }
  std::string take_string() { return take_bytes(take<uint64_t>()); }
  std::vector<std::string> take_string_array() {
    if (take<uint32_t>() != 8) throw std::runtime_error("GGUF: expected a string array");
    std::vector<std::string> v(size_t(take<uint64_t>()));
    for (auto& s : v) s = take_string();
    return v;
  }
  template <class T>
  std::vector<T> take_array(uint32_t expected_type) {
    if (take<uint32_t>() != expected_type) throw std::runtime_error("GGUF: unexpected array type");
    std::vector<T> v(size_t(take<uint64_t>()));
    for (auto& x : v) x = take<T>();
    return v;
  }
  // Ids are stored as uint32 (sometimes int32); 0xFFFFFFFF means "none".
  std::optional<int32_t> take_id(uint32_t type) {
    if (type != 4 && type != 5) throw std::runtime_error("GGUF: unexpected id type");
    const uint32_t v = take<uint32_t>();
    if (v == 0xFFFFFFFFu) return std::nullopt;
    return int32_t(v);
  }
  static uint64_t scalar_size(uint32_t type) {
    switch (type) {
      case 0:
      case 1:
      case 7:
        return 1;
      case 2:
      case 3:
        return 2;
      case 4:
      case 5:
      case 6:
        return 4;
      case 10:
      case 11:
      case 12:
        return 8;
      default:
        throw std::runtime_error("GGUF: unknown value type " + std::to_string(type));
    }
  }
  void skip_value(uint32_t type) {
    if (type == 8) {
      take_string();
    } else if (type == 9) {
      const uint32_t element = take<uint32_t>();
      const uint64_t n = take<uint64_t>();
      for (uint64_t i = 0; i < n; ++i) skip_value(element);
    } else {
      in_.seekg(std::streamoff(scalar_size(type)), std::ios::cur);
    }
  }

  std::ifstream in_;
};

inline TokenizerData read_gguf_tokenizer_for_tests(const std::string& path) {
  return GgufTokenizerReader(path).read();
}

}  // namespace iron::text::testing
