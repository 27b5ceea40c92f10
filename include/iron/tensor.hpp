// A host tensor: contiguous, owning its memory or a view of memory something else keeps alive
// (a memory-mapped checkpoint, a caller's buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "iron/dtype.hpp"

namespace iron {

using Shape = std::vector<int64_t>;

int64_t element_count(const Shape& shape);
std::string to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised memory of `shape`, 64-byte aligned.
  static Tensor empty(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype);
  /// `values` (row-major) converted once to `dtype`.
  static Tensor from(const std::vector<float>& values, const Shape& shape, DType dtype = f32);
  static Tensor from_ints(const std::vector<int32_t>& values, const Shape& shape);
  /// A view of `data`, which `keepalive` (if any) keeps valid; nothing is copied.
  /// A writable view of `data`, which `keepalive` (if any) keeps valid; nothing is copied.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> keepalive = {});
  static Tensor borrow(const void* data, const Shape& shape, DType dtype,
                       std::shared_ptr<const void> keepalive = {});

  bool defined() const { return data_ != nullptr || numel() == 0; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int axis) const;
  int rank() const { return int(shape_.size()); }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return element_count(shape_); }
  int64_t nbytes() const { return storage_bytes(dtype_, numel()); }

  const void* data() const { return data_; }
  /// Writable memory; throws for a borrowed read-only view.
  void* mutable_data();
  template <class T>
  const T* data_as() const {
    return static_cast<const T*>(data_);
  }
  template <class T>
  T* mutable_data_as() {
    return static_cast<T*>(mutable_data());
  }

  /// The same memory seen with another shape of as many elements.
  Tensor reshape(const Shape& shape) const;
  /// Rows [begin, end) of the leading axis, sharing memory.
  Tensor rows(int64_t begin, int64_t end) const;
  /// A new tensor of `dtype`, values converted (dequantised) once.
  Tensor to(DType dtype) const;
  /// A deep copy that owns its memory.
  Tensor clone() const;
  std::vector<float> to_floats() const;
  std::vector<int32_t> to_ints() const;

  /// Element `flat` as f32 (any dtype but the block kinds).
  float item(int64_t flat = 0) const;

 private:
  Shape shape_;
  DType dtype_ = f32;
  const void* data_ = nullptr;
  bool writable_ = false;
  std::shared_ptr<const void> holder_;
};

}  // namespace iron
