// What a completion or an embeddings request asks for, read from its JSON body and checked: the
// one parser of outside input in the server (fuzz/serve_request.cpp runs it on anything). OpenAI's field names;
// fields it does not know are listed (the server logs them) and otherwise ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "iron/error.hpp"
#include "iron/sampling.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::serve {

/// An error answered as OpenAI's JSON error object, with its HTTP status.
class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {},
           std::string code = {})
      : Error(ErrorKind::value, message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  /// {"error": {"message", "type", "param", "code"}}, as OpenAI answers.
  std::string json() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

/// A 400 invalid_request_error about `param`.
[[noreturn]] void bad_request(const std::string& message, const std::string& param = {});

enum class Endpoint { chat, completion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completion;
  std::string model;                       // as asked (any name is answered by the one model)
  std::vector<text::ChatMessage> messages;  // chat
  std::string prompt;                      // completion
  std::optional<int64_t> max_tokens;       // none: until the end of sequence or a full context
  // OpenAI's defaults: temperature 1, top_p 1, and top_k 0 (every token; OpenAI has no top_k,
  // llama.cpp's name). The seed is the request's only when `seeded`; else the server picks one.
  Sampling sampling{1.0, 0, 1.0, 0};
  bool seeded = false;
  std::vector<std::string> stop;           // up to 4, none empty
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  bool ignore_eos = false;                 // llama.cpp's extension: generate max_tokens whatever
  bool return_tokens = false;              // an extension: each choice also lists its token ids
  std::vector<std::string> ignored;        // fields not read (logged by the server)
};

/// Reads and checks a request body for `endpoint`: malformed JSON, a field of the wrong type or
/// out of range, a missing prompt or messages are each an ApiError (400) naming the field.
/// `max_body` bounds what is read (the server refuses a longer body with 413 before this).
CompletionRequest parse_request(std::string_view body, Endpoint endpoint);

/// What POST /v1/embeddings asks for: texts (`input`: a string or an array of strings; OpenAI's
/// token-id arrays are refused, since an encoder's ids come from its own tokenizer), and how the
/// vectors are written back: OpenAI's `dimensions` (Matryoshka: the first N values, normalised
/// again) and this server's own `prompt_name` (the model's prompt put before each text:
/// EmbeddingGemma's "query", "document", ...; null or absent: the model's default).
struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> inputs;  // at least one, at most kMaxEmbeddingInputs
  bool base64 = false;              // encoding_format "base64": little-endian f32 bytes
  int64_t dimensions = 0;           // 0: all of them
  std::optional<std::string> prompt_name;
  std::vector<std::string> ignored;
};
inline constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's own limit

EmbeddingRequest parse_embedding_request(std::string_view body);

}  // namespace iron::serve
