// A checkpoint file of either format, seen as named tensors.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iron/tensor.hpp"

namespace iron {

/// A checkpoint as a tree of named tensors, keyed by dotted path, in file order.
class StateDict {
 public:
  /// Adds `t` under `name`; a value error if the name is already there.
  void insert(std::string name, Tensor t);
  bool contains(std::string_view name) const;
  /// An index error naming the missing name.
  const Tensor& at(std::string_view name) const;
  const std::vector<std::pair<std::string, Tensor>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Tensor>> items_;
  std::map<std::string, size_t, std::less<>> index_;
};

/// Opens a GGUF or safetensors file (told apart by its first bytes, not its extension) as a
/// StateDict whose tensors borrow the mapping. GGUF names stay as the file spells them
/// ("blk.0.attn_q.weight"). Throws iron::Error for an unreadable or malformed file, or one
/// holding a tensor type IRON cannot load.
StateDict open_checkpoint(const std::string& path);

}  // namespace iron
