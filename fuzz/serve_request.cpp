// Bytes as a request body of `iron serve` -> parse_request or parse_embedding_request (the first
// byte picks the endpoint: embeddings when its bit 1 is set, else chat when odd). A completion
// it takes must give settings the sampler takes, an embeddings request one to 2048 texts; one it
// refuses must be an ApiError whose JSON error object parses.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "iron/functional.hpp"
#include "serve/request.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void serve_request(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const auto endpoint = data[0] & 1 ? serve::Endpoint::chat : serve::Endpoint::completion;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 2) {
      const serve::EmbeddingRequest e = serve::parse_embedding_request(body);
      IRON_FUZZ_CHECK(!e.inputs.empty() && e.inputs.size() <= serve::kMaxEmbeddingInputs);
      return;
    }
    const serve::CompletionRequest r = serve::parse_request(body, endpoint);
    IRON_FUZZ_CHECK(r.sampling.temperature >= 0 && r.sampling.temperature <= 2);
    IRON_FUZZ_CHECK(r.sampling.top_p > 0 && r.sampling.top_p <= 1);
    IRON_FUZZ_CHECK(r.sampling.top_k >= 0 && r.sampling.top_k <= INT32_MAX);
    IRON_FUZZ_CHECK(!r.max_tokens || *r.max_tokens > 0);
    IRON_FUZZ_CHECK(r.stop.size() <= 4);
    for (const std::string& s : r.stop) IRON_FUZZ_CHECK(!s.empty());
    if (endpoint == serve::Endpoint::chat) {
      IRON_FUZZ_CHECK(!r.messages.empty());
      for (const auto& m : r.messages) IRON_FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant");
    }
    r.sampling.check();  // never refuses them
  } catch (const serve::ApiError& e) {
    IRON_FUZZ_CHECK(e.status() >= 400 && e.status() < 600);
    const auto j = nlohmann::json::parse(e.json(), nullptr, false);
    IRON_FUZZ_CHECK(!j.is_discarded() && j.contains("error"));
  }
}

}  // namespace iron::fuzz
