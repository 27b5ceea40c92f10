// Test helpers for the checkpoint readers: where the models are, temporary files, and tiny writers
// of GGUF and safetensors files (so the readers are tested against bytes built independently).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "iron/error.hpp"
#include "sanitized.hpp"  // IRON_NEEDS_MODEL skips whole models under the sanitizers

namespace iron::io::testing {

/// A file under the shared models folder: $IRON_SHARED_DIR/models/NAME when that variable is set,
/// else ../shared/models/NAME next to the source tree.
inline std::string shared_model_path(const std::string& name) {
  if (const char* shared = std::getenv("IRON_SHARED_DIR"); shared && *shared)
    return std::string(shared) + "/models/" + name;
  return std::string(IRON_SOURCE_DIR) + "/../shared/models/" + name;
}

inline std::string stories_path() { return shared_model_path("stories260K.gguf"); }

/// Whether a missing file of ../shared/ fails a test instead of skipping it: scripts/test.sh sets
/// IRON_REQUIRE_SHARED=1 whenever ../shared/ is there, so that a bare clone skips and CI fails.
inline bool shared_required() {
  const char* v = std::getenv("IRON_REQUIRE_SHARED");
  return v && std::string(v) == "1";
}

}  // namespace iron::io::testing

/// The first line of a test that reads stories260K from ../shared/models: skips it, naming the
/// missing path, when the file is absent (or fails it under IRON_REQUIRE_SHARED=1).
#define IRON_NEEDS_STORIES()                                                                    \
  do {                                                                                          \
    const std::string needed_ = ::iron::io::testing::stories_path();                            \
    if (!std::filesystem::exists(needed_)) {                                                    \
      if (::iron::io::testing::shared_required()) FAIL() << needed_ << " is absent (IRON_REQUIRE_SHARED=1)"; \
      GTEST_SKIP() << needed_ << " is absent: ../shared/ is not beside the repository";         \
    }                                                                                           \
  } while (0)

/// The first line of a test of a whole fetched model against its golden logits: skipped under
/// the sanitizers (the Release build runs it) and where `path` is absent, naming `fetch`, the
/// scripts/fetch-model.sh argument that gets it.
#ifdef IRON_SANITIZED_BUILD
#define IRON_NEEDS_MODEL(path, fetch) GTEST_SKIP() << "sanitizer build: the Release build runs " << (path)
#else
#define IRON_NEEDS_MODEL(path, fetch)                                                           \
  do {                                                                                          \
    const std::string needed_ = (path);                                                         \
    if (!std::filesystem::exists(needed_))                                                      \
      GTEST_SKIP() << needed_ << " is absent: run scripts/fetch-model.sh " << (fetch);          \
  } while (0)
#endif

namespace iron::io::testing {

/// A large model kept (git-ignored) under models/ in the source tree; may be absent.
inline std::string local_model_path(const std::string& name) {
  return std::string(IRON_SOURCE_DIR) + "/models/" + name;
}

/// A fetched model's file under models/, or the file the environment variable `other` names
/// (another file of the same weights, e.g. a dequantised copy) where it is set.
inline std::string model_file(const char* other, const std::string& name) {
  const char* given = std::getenv(other);
  return given ? given : local_model_path(name);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

/// Writes `bytes` to a fresh file in the test temporary folder and returns its path.
inline std::string write_temp_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = ::testing::TempDir() + "iron_io_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

/// Runs `fn`, which must throw iron::Error whose message contains `phrase`.
template <class Fn>
void expect_error(Fn&& fn, const std::string& phrase, ErrorKind kind = ErrorKind::value) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one mentioning '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos)
        << "message '" << e.what() << "' lacks '" << phrase << "'";
    EXPECT_EQ(int(e.kind()), int(kind)) << e.what();
  }
}

/// Little-endian byte sink.
struct Bytes {
  std::vector<uint8_t> data;

  template <class T>
  Bytes& put(T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    data.insert(data.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& put_string(const std::string& text) {
    put<uint64_t>(text.size());
    data.insert(data.end(), text.begin(), text.end());
    return *this;
  }
  Bytes& append(const std::vector<uint8_t>& more) {
    data.insert(data.end(), more.begin(), more.end());
    return *this;
  }
};

/// Builds GGUF files: metadata values are written through Bytes in their wire encoding, tensors
/// are laid out at aligned offsets (or a forced offset, for malformed files).
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, uint32_t alignment = 32)
      : version_(version), alignment_(alignment) {}

  /// A key and a raw value: `type` then `value_bytes` (already encoded).
  GgufWriter& raw_kv(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
    metadata_.put_string(key).put<uint32_t>(type).append(value);
    ++kv_count_;
    return *this;
  }
  template <class T>
  GgufWriter& kv(const std::string& key, uint32_t type, T value) {
    return raw_kv(key, type, Bytes().put<T>(value).data);
  }
  GgufWriter& kv_string(const std::string& key, const std::string& value) {
    return raw_kv(key, 8, Bytes().put_string(value).data);
  }
  template <class T>
  static std::vector<uint8_t> array(uint32_t element_type, const std::vector<T>& items) {
    Bytes out;
    out.put<uint32_t>(element_type).put<uint64_t>(items.size());
    for (const T& item : items) out.put<T>(item);
    return out.data;
  }
  static std::vector<uint8_t> string_array(const std::vector<std::string>& items) {
    Bytes out;
    out.put<uint32_t>(8).put<uint64_t>(items.size());
    for (const auto& item : items) out.put_string(item);
    return out.data;
  }
  /// An array of already-encoded arrays (the bytes of `array()` or `string_array()`).
  static std::vector<uint8_t> nested_array(const std::vector<std::vector<uint8_t>>& arrays) {
    Bytes out;
    out.put<uint32_t>(9).put<uint64_t>(arrays.size());
    for (const auto& inner : arrays) out.append(inner);
    return out.data;
  }

  /// A tensor with dims in ggml order; `forced_offset` overrides the computed offset.
  GgufWriter& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                     const std::vector<uint8_t>& bytes,
                     std::optional<uint64_t> forced_offset = std::nullopt) {
    tensors_.push_back({name, dims, type, bytes, forced_offset});
    return *this;
  }

  std::vector<uint8_t> build() const {
    Bytes out;
    out.data = {'G', 'G', 'U', 'F'};
    out.put<uint32_t>(version_).put<uint64_t>(tensors_.size()).put<uint64_t>(kv_count_);
    out.append(metadata_.data);
    Bytes data;
    for (const auto& t : tensors_) {
      while (data.data.size() % alignment_) data.data.push_back(0);
      out.put_string(t.name).put<uint32_t>(uint32_t(t.dims.size()));
      for (uint64_t d : t.dims) out.put<uint64_t>(d);
      out.put<uint32_t>(t.type);
      out.put<uint64_t>(t.forced_offset.value_or(data.data.size()));
      data.append(t.bytes);
    }
    while (out.data.size() % alignment_) out.data.push_back(0);
    out.append(data.data);
    return out.data;
  }

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> bytes;
    std::optional<uint64_t> forced_offset;
  };
  uint32_t version_;
  uint32_t alignment_;
  uint64_t kv_count_ = 0;
  Bytes metadata_;
  std::vector<PendingTensor> tensors_;
};

/// Builds a safetensors file from a header written as JSON text and the raw data section.
inline std::vector<uint8_t> safetensors_bytes(const std::string& header_json,
                                              const std::vector<uint8_t>& data,
                                              bool pad_header = true) {
  std::string header = header_json;
  if (pad_header)
    while ((8 + header.size()) % 8) header.push_back(' ');
  Bytes out;
  out.put<uint64_t>(header.size());
  out.data.insert(out.data.end(), header.begin(), header.end());
  out.append(data);
  return out.data;
}

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// A tiny Llama as a Hugging Face directory (config.json, model.safetensors of zeros and, when
/// `tokenizer_json` is given, tokenizer.json), for checks of what open() refuses.
struct TinyHfModel {
  int64_t layers = 1, dim = 8, heads = 2, kv_heads = 1, ffn = 16, vocab = 16;
  int64_t config_layers = -1;                        // what config.json says (-1: layers)
  int64_t config_head_dim = -1;                      // config.json's head_dim (-1: none, dim / heads)
  int64_t context = 64;                              // config.json's max_position_embeddings
  std::map<std::string, std::string> dtypes;         // a tensor's safetensors dtype (else F32)
  std::vector<std::string> extra_tensors;            // more tensors of shape (1,), by name
  std::string omitted;                               // a layer tensor left out of every layer ("mlp.up_proj.weight")
  std::string tokenizer_json;                        // a path copied in as tokenizer.json

  TinyHfModel() = default;
  TinyHfModel(const TinyHfModel&) = delete;
  TinyHfModel& operator=(const TinyHfModel&) = delete;
  /// Removes the directories write() made.
  ~TinyHfModel() {
    std::error_code ignored;
    for (const std::string& dir : written_) std::filesystem::remove_all(dir, ignored);
  }

  /// Writes the directory under the temp directory (removed with this object) and returns its path.
  std::string write(const std::string& name) const {
    namespace fs = std::filesystem;
    const int64_t hd = dim / heads;
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
        {"model.embed_tokens.weight", {vocab, dim}}, {"model.norm.weight", {dim}}, {"lm_head.weight", {vocab, dim}}};
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      tensors.push_back({p + "self_attn.q_proj.weight", {heads * hd, dim}});
      tensors.push_back({p + "self_attn.k_proj.weight", {kv_heads * hd, dim}});
      tensors.push_back({p + "self_attn.v_proj.weight", {kv_heads * hd, dim}});
      tensors.push_back({p + "self_attn.o_proj.weight", {dim, heads * hd}});
      tensors.push_back({p + "input_layernorm.weight", {dim}});
      tensors.push_back({p + "mlp.gate_proj.weight", {ffn, dim}});
      tensors.push_back({p + "mlp.up_proj.weight", {ffn, dim}});
      tensors.push_back({p + "mlp.down_proj.weight", {dim, ffn}});
      tensors.push_back({p + "post_attention_layernorm.weight", {dim}});
    }
    if (!omitted.empty())
      std::erase_if(tensors, [&](const auto& t) { return t.first.ends_with("." + omitted); });
    for (const std::string& n : extra_tensors) tensors.push_back({n, {1}});
    nlohmann::json header = nlohmann::json::object();
    std::vector<uint8_t> data;
    for (const auto& [n, shape] : tensors) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      const size_t begin = data.size();
      data.resize(begin + size_t(count) * 4);
      const auto found = dtypes.find(n);
      header[n] = {{"dtype", found == dtypes.end() ? "F32" : found->second},
                   {"shape", shape},
                   {"data_offsets", {begin, data.size()}}};
    }
    const fs::path dir = fs::temp_directory_path() / ("iron_tiny_hf_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto bytes = safetensors_bytes(header.dump(), data);
    std::ofstream((dir / "model.safetensors").string(), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    const nlohmann::json config = {{"model_type", "llama"},
                                   {"num_hidden_layers", config_layers < 0 ? layers : config_layers},
                                   {"hidden_size", dim},
                                   {"num_attention_heads", heads},
                                   {"num_key_value_heads", kv_heads},
                                   {"intermediate_size", ffn},
                                   {"vocab_size", vocab},
                                   {"max_position_embeddings", context},
                                   {"rms_norm_eps", 1e-5},
                                   {"tie_word_embeddings", false}};
    nlohmann::json written = config;
    if (config_head_dim >= 0) written["head_dim"] = config_head_dim;
    std::ofstream((dir / "config.json").string()) << written.dump();
    if (!tokenizer_json.empty()) fs::copy_file(tokenizer_json, dir / "tokenizer.json");
    written_.push_back(dir.string());
    return dir.string();
  }

 private:
  mutable std::vector<std::string> written_;
};

}  // namespace iron::io::testing
