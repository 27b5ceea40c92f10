#include "iron/io/checkpoint.hpp"

#include <cstring>

#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/mapped_file.hpp"
#include "iron/io/safetensors.hpp"

namespace iron {

void StateDict::insert(std::string name, Tensor t) {
  if (index_.count(name)) value_error("state dict already holds a tensor named '" + escaped(name) + "'");
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(t));
}

bool StateDict::contains(std::string_view name) const { return index_.find(name) != index_.end(); }

const Tensor& StateDict::at(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    index_error("state dict has no tensor named '" + escaped(name) + "' (it holds " +
                std::to_string(items_.size()) + " tensors)");
  return items_[it->second].second;
}

StateDict open_checkpoint(const std::string& path) {
  auto file = io::MappedFile::open(path);
  const uint8_t* bytes = file->data();
  StateDict state;
  if (file->size() >= 4 && std::memcmp(bytes, "GGUF", 4) == 0) {
    io::GgufFile gguf = io::GgufFile::parse(file);
    for (const io::GgufTensorInfo& info : gguf.tensors())
      state.insert(info.name, gguf.tensor(info.name));
    return state;
  }
  // safetensors: an 8-byte header length, then a JSON object (so '{', perhaps after spaces).
  size_t first = 8;
  while (first < file->size() && first < 64 && bytes[first] == ' ') ++first;
  if (file->size() > 8 && first < file->size() && bytes[first] == '{') {
    io::SafetensorsFile safetensors = io::SafetensorsFile::parse(file);
    for (const io::SafetensorsTensorInfo& info : safetensors.tensors())
      state.insert(info.name, safetensors.tensor(info.name));
    return state;
  }
  value_error(escaped_path(path) + ": not a GGUF or safetensors checkpoint (unrecognised first bytes)");
}

}  // namespace iron
