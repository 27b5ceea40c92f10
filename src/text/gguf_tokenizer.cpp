// The tokenizer a GGUF file carries in its tokenizer.* metadata.
#include <string>

#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::text {
namespace {

// An optional special-token id: absent, 0xFFFFFFFF (llama.cpp's "none"), negative or outside the
// vocabulary all mean there is no such token.
std::optional<int32_t> token_id(const io::GgufFile& gguf, const std::string& key, size_t vocab) {
  const std::optional<int64_t> id = gguf.get_int(key);
  if (!id || *id < 0 || uint64_t(*id) >= vocab || *id == 0xFFFFFFFFll) return std::nullopt;
  return int32_t(*id);
}

}  // namespace

TokenizerData tokenizer_data_from_gguf(const io::GgufFile& gguf) {
  auto require = [&](const char* key) {
    if (!gguf.find(key))
      value_error(escaped_path(gguf.path()) + ": no tokenizer: metadata key '" + std::string(key) +
                  "' is missing");
  };
  require("tokenizer.ggml.model");
  require("tokenizer.ggml.tokens");

  TokenizerData d;
  d.model = *gguf.get_string("tokenizer.ggml.model");
  d.pre = gguf.get_string("tokenizer.ggml.pre").value_or("");
  d.tokens = gguf.get_strings("tokenizer.ggml.tokens");
  if (d.tokens.empty())
    value_error(escaped_path(gguf.path()) + ": metadata key 'tokenizer.ggml.tokens' is an empty array");
  d.scores = gguf.get_floats("tokenizer.ggml.scores");
  d.token_types = gguf.get_ints("tokenizer.ggml.token_type");
  d.merges = gguf.get_strings("tokenizer.ggml.merges");
  const size_t vocab = d.tokens.size();
  d.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", vocab);
  d.eos_id = token_id(gguf, "tokenizer.ggml.eos_token_id", vocab);
  d.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", vocab);
  d.pad_id = token_id(gguf, "tokenizer.ggml.padding_token_id", vocab);
  d.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token");
  d.add_space_prefix = gguf.get_bool("tokenizer.ggml.add_space_prefix");
  d.chat_template = gguf.get_string("tokenizer.chat_template");
  return d;
}

Tokenizer tokenizer_from_gguf(const io::GgufFile& gguf) {
  try {
    return Tokenizer::build(tokenizer_data_from_gguf(gguf));
  } catch (const Error& e) {
    const std::string what = e.what(), where = escaped_path(gguf.path());
    if (what.rfind(where, 0) == 0) throw;
    fail(e.kind(), where + ": " + what);
  }
}

}  // namespace iron::text
