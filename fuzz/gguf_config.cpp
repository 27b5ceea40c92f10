// GGUF bytes -> GgufFile -> llama_config_from_gguf, the Llama tensor names, and the file written
// out and described as `iron info` does (describe_checkpoint).
#include "fuzz_util.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/models/describe.hpp"
#include "iron/models/llama_config.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void gguf_config(const uint8_t* data, size_t size) {
  expect_ok_or_error([&] {
    const io::GgufFile gguf = io::GgufFile::parse(in_memory(data, size));
    StateDict checkpoint;
    for (const io::GgufTensorInfo& info : gguf.tensors()) {
      IRON_FUZZ_CHECK(!models::llama_tensor_path(info.name).empty() || info.name.empty());
      expect_ok_or_error([&] { checkpoint.insert(info.name, gguf.tensor(info.name)); });
    }
    expect_ok_or_error([&] {
      const StateDict renamed = models::llama_state_dict(checkpoint);
      IRON_FUZZ_CHECK(renamed.size() == checkpoint.size());
    });
    const models::LlamaConfig config = models::llama_config_from_gguf(gguf);
    IRON_FUZZ_CHECK(config.head_dim > 0 && (config.sliding.empty() || int64_t(config.sliding.size()) == config.layers));
    models::validate(config);
    IRON_FUZZ_CHECK(!config.describe().empty());
  });

  const std::string path =
      write_temp("model.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  expect_ok_or_error([&] {
    models::DescribeOptions options;
    options.string_chars = 16;
    options.array_items = 3;
    IRON_FUZZ_CHECK(!models::describe_checkpoint(path, options).empty());
  });
}

}  // namespace iron::fuzz
