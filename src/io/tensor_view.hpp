// Internal: turns checked checkpoint bytes into an iron::Tensor.
#pragma once

#include <cstdint>
#include <memory>

#include "iron/tensor.hpp"

namespace iron::io::detail {

/// A borrowed view of `data` when it is aligned for the dtype's element type; otherwise an owning
/// copy, so no kernel ever reads a misaligned float or int (formats allow odd offsets: GGUF with
/// alignment 1, safetensors with a header length that is not a multiple of 8). Block-quantised
/// kinds are read bytewise (their f16 scales through memcpy), so they are always borrowed.
inline Tensor view_or_copy(const uint8_t* data, const Shape& shape, DType dtype,
                           std::shared_ptr<const void> keepalive) {
  const DTypeInfo& layout = info(dtype);
  size_t alignment = layout.quantised ? 1 : size_t(layout.bytes);
  Tensor view = Tensor::borrow(data, shape, dtype, std::move(keepalive));
  if (reinterpret_cast<uintptr_t>(data) % alignment == 0) return view;
  return view.clone();
}

}  // namespace iron::io::detail
