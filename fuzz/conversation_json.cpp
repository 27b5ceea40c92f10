// Bytes as a saved conversation (`iron chat`'s /load) -> read_json_file -> conversation_from_json.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/conversation.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void conversation_json(const uint8_t* data, size_t size) {
  const std::string path =
      write_temp("conversation.json", std::string_view(reinterpret_cast<const char*>(data), size));
  expect_ok_or_error([&] {
    const nlohmann::json json = io::read_json_file(path);
    const int64_t vocab = 49152;
    for (const models::ConversationMessage& m : models::conversation_from_json(json, vocab)) {
      IRON_FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant");
      for (int32_t id : m.ids) IRON_FUZZ_CHECK(id >= 0 && id < vocab);
      IRON_FUZZ_CHECK(m.ids.empty() || m.role == "assistant");
    }
  });
}

}  // namespace iron::fuzz
