// Bytes as a Hugging Face config.json -> read_json_file -> llama_config_from_hf.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/llama_config.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void hf_config(const uint8_t* data, size_t size) {
  const std::string path =
      write_temp("config.json", std::string_view(reinterpret_cast<const char*>(data), size));
  expect_ok_or_error([&] {
    const nlohmann::json json = io::read_json_file(path);
    const models::LlamaConfig config = models::llama_config_from_hf(json);
    IRON_FUZZ_CHECK(config.head_dim > 0 && (config.sliding.empty() || int64_t(config.sliding.size()) == config.layers));
    IRON_FUZZ_CHECK(config.kv_heads > 0 && config.heads % config.kv_heads == 0);
    models::validate(config);
    IRON_FUZZ_CHECK(!config.describe().empty());
  });
}

}  // namespace iron::fuzz
