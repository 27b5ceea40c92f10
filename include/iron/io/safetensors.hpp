// safetensors (Hugging Face's checkpoint format) and the JSON files that travel with it.
// The file is untrusted input: the header length, every offset and every size are checked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "iron/dtype.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/tensor.hpp"

namespace iron::io {

/// One entry of the header.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;      // as the file spells it: "F32", "BF16", "I64"...
  std::optional<DType> dtype;  // empty when IRON has no such dtype (tensor() refuses it)
  Shape shape;                 // row-major
  uint64_t offset = 0;         // absolute byte offset of the data in the file
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  /// Maps and parses `path`; throws iron::Error (naming the path and the problem) for a bad file.
  static SafetensorsFile open(const std::string& path);
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }
  /// Where the data section starts: 8 + the header length.
  uint64_t data_offset() const { return data_offset_; }

  /// The `__metadata__` string map (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// Tensors in header order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  /// Null when there is no such tensor.
  const SafetensorsTensorInfo* find_tensor(std::string_view name) const;
  /// A view of the tensor's bytes in the mapping (copied only when misaligned for its dtype),
  /// which keeps the mapping alive. Index error for a missing name, value error for a dtype IRON
  /// cannot hold.
  Tensor tensor(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void read_header();

  std::shared_ptr<const MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

/// Reads a JSON file (a Hugging Face config.json, tokenizer.json...), at most `max_bytes` long;
/// throws iron::Error naming the path for a missing, oversized or malformed file.
/// Include <nlohmann/json.hpp> to use the result.
nlohmann::json read_json_file(const std::string& path, size_t max_bytes = size_t(256) << 20);

}  // namespace iron::io
