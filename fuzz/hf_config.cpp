// Bytes as a Hugging Face config.json -> read_json_file -> llama_config_from_hf, and
// bert_config_from_hf; the same bytes as the sentence-transformers files (modules.json, the
// pooling config, sentence_bert_config.json) -> sentence_config_from_dir.
#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/bert.hpp"
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
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::filesystem::create_directories(temp_dir() / "1_Pooling");
  std::filesystem::create_directories(temp_dir() / "2_Dense");
  const char* const sentence_files[] = {"modules.json", "1_Pooling/config.json", "2_Dense/config.json",
                                        "sentence_bert_config.json", "config_sentence_transformers.json"};
  for (const char* name : sentence_files) write_temp(name, bytes);
  expect_ok_or_error([&] {
    const models::BertConfig config = models::bert_config_from_hf(io::read_json_file(path));
    IRON_FUZZ_CHECK(config.dim > 0 && config.heads > 0 && config.dim % config.heads == 0 && config.eps > 0);
    const models::SentenceConfig s = models::sentence_config_from_dir(temp_dir().string(), config.max_positions, config.dim);
    IRON_FUZZ_CHECK(s.max_seq_length >= 2 && s.max_seq_length <= config.max_positions);
    int64_t width = config.dim;  // each dense module takes what the one before gives
    for (const models::DenseModule& m : s.dense) {
      IRON_FUZZ_CHECK(m.in == width && m.out > 0);
      width = m.out;
    }
    IRON_FUZZ_CHECK(!s.default_prompt || s.prompts.count(*s.default_prompt));
  });
  for (const char* name : sentence_files) remove_temp(name);
}

}  // namespace iron::fuzz
