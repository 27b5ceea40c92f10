#include "iron/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "io/tensor_view.hpp"
#include "iron/error.hpp"
#include "iron/io/files.hpp"

namespace iron::io {

namespace {

// The reference implementation refuses headers above 100 MB; a bigger one is not a checkpoint.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

struct SafetensorsDType {
  std::string_view name;
  int bytes;
  std::optional<DType> dtype;
};

constexpr std::array<SafetensorsDType, 15> kDTypes = {{
    {"F32", 4, DType::f32},
    {"F16", 2, DType::f16},
    {"BF16", 2, DType::bf16},
    {"I8", 1, DType::i8},
    {"I32", 4, DType::i32},
    {"F64", 8, {}},
    {"I64", 8, {}},
    {"U64", 8, {}},
    {"U32", 4, {}},
    {"I16", 2, {}},
    {"U16", 2, {}},
    {"U8", 1, {}},
    {"BOOL", 1, {}},
    {"F8_E4M3", 1, {}},
    {"F8_E5M2", 1, {}},
}};

[[noreturn]] void fail_at(const std::string& path, const std::string& message) {
  value_error(escaped_path(path) + ": " + message);
}

const SafetensorsDType* find_dtype(std::string_view name) {
  for (const SafetensorsDType& dtype : kDTypes)
    if (dtype.name == name) return &dtype;
  return nullptr;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  return parse(MappedFile::open(path));
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  if (!file) value_error("SafetensorsFile::parse: no file");
  SafetensorsFile out;
  out.file_ = std::move(file);
  out.read_header();
  return out;
}

void SafetensorsFile::read_header() {
  auto fail = [this](const std::string& message) { fail_at(file_->path(), message); };
  const uint64_t size = file_->size();
  if (size < 8)
    fail("too short for a safetensors header (" + std::to_string(size) + " bytes, need 8)");
  uint64_t header_bytes;
  std::memcpy(&header_bytes, file_->data(), 8);  // little-endian, as the host
  if (header_bytes > size - 8)
    fail("header length " + std::to_string(header_bytes) + " runs past the end of the file (size " +
         std::to_string(size) + ")");
  if (header_bytes > kMaxHeaderBytes)
    fail("header length " + std::to_string(header_bytes) + " is over the 100 MiB limit");
  data_offset_ = 8 + header_bytes;
  const uint64_t data_bytes = size - data_offset_;

  // ordered_json keeps the header's order; the callback refuses a tensor named twice, which a
  // plain parse would silently resolve to the last one.
  std::set<std::string> seen;
  nlohmann::ordered_json::parser_callback_t refuse_duplicates =
      [&](int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json& parsed) {
        if (depth == 1 && event == nlohmann::ordered_json::parse_event_t::key &&
            !seen.insert(parsed.get<std::string>()).second)
          fail("header names '" + escaped(parsed.get<std::string>()) + "' twice");
        return true;
      };
  nlohmann::ordered_json header;
  try {
    const char* text = reinterpret_cast<const char*>(file_->data() + 8);
    header = nlohmann::ordered_json::parse(text, text + header_bytes, refuse_duplicates);
  } catch (const nlohmann::json::exception& e) {
    fail("header is not valid JSON: " + escaped(e.what()));  // the parser quotes what it read, raw
  }
  if (!header.is_object()) fail("header is not a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("__metadata__ entry '" + escaped(key) + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    std::string what = "tensor '" + escaped(name) + "'";
    if (!entry.is_object()) fail(what + " is not a JSON object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string())
      fail(what + " has no dtype string");
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail(what + " has no shape array");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      fail(what + " has no data_offsets pair");

    SafetensorsTensorInfo tensor;
    tensor.name = name;
    tensor.dtype_name = entry["dtype"].get<std::string>();
    const SafetensorsDType* layout = find_dtype(tensor.dtype_name);
    if (!layout) fail(what + " has unknown dtype '" + escaped(tensor.dtype_name) + "'");
    tensor.dtype = layout->dtype;

    uint64_t numel = 1;
    for (const auto& dim : entry["shape"]) {
      if (!dim.is_number_unsigned())
        fail(what + " has a shape entry that is not a count: " + escaped(dim.dump(), 60));
      auto extent = dim.get<uint64_t>();
      if (extent > uint64_t(std::numeric_limits<int64_t>::max()) ||
          (extent != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / extent))
        fail(what + " has a shape whose element count overflows");
      numel *= extent;
      tensor.shape.push_back(int64_t(extent));
    }
    if (numel > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(layout->bytes))
      fail(what + " has a byte size that overflows");
    tensor.nbytes = numel * uint64_t(layout->bytes);

    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      fail(what + " has data_offsets that are not byte counts: " + escaped(offsets.dump(), 60));
    auto begin = offsets[0].get<uint64_t>();
    auto end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
      fail(what + " data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           ") fall outside the data section (" + std::to_string(data_bytes) + " bytes)");
    if (end - begin != tensor.nbytes)
      fail(what + " data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           ") hold " + std::to_string(end - begin) + " bytes but shape " + to_string(tensor.shape) +
           " of " + tensor.dtype_name + " needs " + std::to_string(tensor.nbytes) +
           " (size mismatch)");
    tensor.offset = data_offset_ + begin;
    tensor_index_.emplace(tensor.name, tensors_.size());
    tensors_.push_back(std::move(tensor));
  }

  // No two tensors may share bytes: sorted by start, each must begin at or after the last end.
  // Empty tensors hold no bytes, so they cannot overlap anything.
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& tensor : tensors_)
    if (tensor.nbytes > 0) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* previous = by_offset[i - 1];
    if (by_offset[i]->offset < previous->offset + previous->nbytes)
      fail("tensors '" + escaped(previous->name) + "' and '" + escaped(by_offset[i]->name) + "' overlap");
  }
}

const SafetensorsTensorInfo* SafetensorsFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensorInfo* tensor = find_tensor(name);
  if (!tensor) index_error(escaped_path(path()) + ": no tensor named '" + escaped(name) + "'");
  if (!tensor->dtype)
    value_error(escaped_path(path()) + ": tensor '" + escaped(tensor->name) + "' has dtype " + escaped(tensor->dtype_name) +
                ", which IRON cannot load");
  return detail::view_or_copy(file_->data() + tensor->offset, tensor->shape, *tensor->dtype, file_);
}

nlohmann::json read_json_file(const std::string& path, size_t max_bytes) {
  const std::string text = read_file(path, max_bytes, "a JSON file");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // The parser quotes the bytes it stopped at as they are (invalid UTF-8, control bytes).
    value_error(escaped_path(path) + ": not valid JSON: " + escaped(e.what()));
  }
}

}  // namespace iron::io
