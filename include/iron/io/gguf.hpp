// GGUF (llama.cpp's checkpoint format, versions 2 and 3): metadata, tensor table, tensor views.
// The file is untrusted input: every length, count, offset and size is checked before use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "iron/dtype.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/tensor.hpp"

namespace iron::io {

/// GGUF metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
std::string_view name(GgufType type);

/// An array value: a typed vector whose variant index is the element's GgufType number
/// (nested arrays are vectors of GgufArray).
struct GgufArray {
  using Items = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                             std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                             std::vector<float>, std::vector<bool>, std::vector<std::string>,
                             std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
                             std::vector<double>>;
  Items items;

  GgufType element_type() const { return GgufType(items.index()); }
  size_t size() const;
};

/// One metadata value; the variant index is its GgufType number.
struct GgufValue {
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;
  Storage value;

  GgufType type() const { return GgufType(value.index()); }
  /// "u32", "string", "array of string", "array of array of i32"...
  std::string type_name() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

/// One entry of the tensor table.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;   // ggml order: ne0 (the contiguous dimension) first
  uint32_t ggml_type = 0;      // the ggml type id as stored
  std::optional<DType> dtype;  // empty when IRON has no such dtype (tensor() refuses it)
  uint64_t offset = 0;         // absolute byte offset of the data in the file
  int64_t nbytes = -1;         // data size; -1 when the ggml type's layout is unknown
  int64_t numel = 0;

  /// Row-major shape: the ggml dims reversed (a ggml 576x1536 weight is {1536, 576}).
  Shape shape() const { return Shape(dims.rbegin(), dims.rend()); }
};

/// The name of a ggml type id ("Q4_1"), or "type N" for one IRON does not know.
std::string ggml_type_name(uint32_t ggml_type);

class GgufFile {
 public:
  /// Maps and parses `path`; throws iron::Error (naming the path and the problem) for a bad file.
  static GgufFile open(const std::string& path);
  static GgufFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  /// Where the tensor data section starts (aligned).
  uint64_t data_offset() const { return data_offset_; }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

  // ---- metadata, in file order ----
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  /// Null when there is no such key.
  const GgufValue* find(std::string_view key) const;
  // Typed getters: empty (or an empty vector) when the key is missing; a value error naming the
  // key, the wanted and the stored type when it holds something else.
  /// Any integer type (a u64 above INT64_MAX is refused).
  std::optional<int64_t> get_int(std::string_view key) const;
  /// f32 or f64, or an integer converted.
  std::optional<double> get_float(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  /// An array of strings.
  std::vector<std::string> get_strings(std::string_view key) const;
  /// An array of f32 (or f64, narrowed).
  std::vector<float> get_floats(std::string_view key) const;
  /// An array of any integer type whose values all fit in int32.
  std::vector<int32_t> get_ints(std::string_view key) const;

  // ---- tensors, in file order ----
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// Null when there is no such tensor.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  /// A view of the tensor's bytes in the mapping (no copy), which it keeps alive. Throws an index
  /// error for a missing name and a value error for a ggml type IRON cannot hold.
  Tensor tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& value,
                               std::string_view wanted) const;

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace iron::io
