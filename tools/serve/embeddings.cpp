#include "serve/embeddings.hpp"

#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace iron::serve {

std::string f32_text(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", x);
  return buffer;
}

namespace {

// RFC 4648 base64 (with padding) of the vector's bytes as the host stores them: x86-64 and every
// other target this builds for are little-endian, as the format asks.
std::string base64(const std::vector<float>& v) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t j = 0; j < 3; ++j) chunk = chunk << 8 | (j < n ? uint8_t(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kDigits[(chunk >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

}  // namespace

std::string embeddings_json(const std::vector<std::vector<float>>& vectors, const std::string& model, int64_t tokens,
                            bool as_base64) {
  // Written by hand in OpenAI's order: nlohmann would print each f32 as the double it widens
  // to (17 digits).
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":";
    out += std::to_string(i);
    out += ",\"embedding\":";
    if (as_base64) {
      out += '"';
      out += base64(vectors[i]);
      out += "\"}";
      continue;
    }
    out += '[';
    for (size_t j = 0; j < vectors[i].size(); ++j) {
      if (j) out += ',';
      out += f32_text(vectors[i][j]);
    }
    out += "]}";
  }
  out += "],\"model\":" + nlohmann::json(model).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         ",\"usage\":{\"prompt_tokens\":" + std::to_string(tokens) + ",\"total_tokens\":" + std::to_string(tokens) +
         "}}";
  return out;
}

}  // namespace iron::serve
