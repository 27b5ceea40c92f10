// OpenAI's embeddings response, as `iron embed --format json` prints it and `iron serve`'s
// POST /v1/embeddings answers: {"object": "list", "data": [{"object": "embedding", "index",
// "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}, each vector written as its
// f32 values (enough digits to read back the same float), or as base64 of their little-endian
// bytes (encoding_format "base64", what PyPI's openai client asks for by default).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iron::serve {

/// `x` with enough digits to read back the same f32 (%.9g).
std::string f32_text(double x);

std::string embeddings_json(const std::vector<std::vector<float>>& vectors, const std::string& model, int64_t tokens,
                            bool base64 = false);

}  // namespace iron::serve
