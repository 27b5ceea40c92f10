#include "iron/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "iron/error.hpp"

namespace iron {

int64_t element_count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) value_error("negative dimension in shape " + to_string(shape));
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << (shape.size() == 1 ? ",)" : ")");
  return out.str();
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  size_t bytes = size_t(storage_bytes(dtype, element_count(shape)));
  size_t rounded = (bytes + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, rounded ? rounded : 64);
  if (memory == nullptr) out_of_memory(int64_t(bytes), "a tensor " + to_string(shape) + " " + std::string(name(dtype)));
  t.holder_ = std::shared_ptr<void>(memory, std::free);
  t.data_ = memory;
  t.writable_ = true;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.mutable_data(), 0, size_t(t.nbytes()));
  return t;
}

Tensor Tensor::from(const std::vector<float>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != element_count(shape))
    value_error(std::to_string(values.size()) + " values do not fill shape " + to_string(shape));
  Tensor t = empty(shape, dtype);
  from_f32(dtype, values.data(), t.mutable_data(), t.numel());
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape) {
  if (int64_t(values.size()) != element_count(shape))
    value_error(std::to_string(values.size()) + " values do not fill shape " + to_string(shape));
  Tensor t = empty(shape, i32);
  if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size() * 4);
  return t;
}

Tensor Tensor::borrow(const void* data, const Shape& shape, DType dtype,
                      std::shared_ptr<const void> keepalive) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  storage_bytes(dtype, element_count(shape));  // validates whole blocks
  t.data_ = data;
  t.holder_ = std::move(keepalive);
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> keepalive) {
  Tensor t = borrow(data, shape, dtype, std::move(keepalive));
  t.writable_ = true;
  return t;
}

int64_t Tensor::dim(int axis) const {
  int r = rank();
  if (axis < -r || axis >= r)
    index_error("axis " + std::to_string(axis) + " is outside a tensor of rank " +
                std::to_string(r));
  return shape_[size_t(axis < 0 ? axis + r : axis)];
}

void* Tensor::mutable_data() {
  if (!writable_) value_error("this tensor is a read-only view of borrowed memory");
  return const_cast<void*>(data_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (element_count(shape) != numel())
    value_error("cannot reshape " + to_string(shape_) + " to " + to_string(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0])
    index_error("rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") are outside " + to_string(shape_));
  Tensor t = *this;
  t.shape_[0] = end - begin;
  int64_t row_bytes = shape_[0] ? nbytes() / shape_[0] : 0;
  t.data_ = static_cast<const char*>(data_) + begin * row_bytes;
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  std::vector<float> values = to_floats();
  return from(values, shape_, dtype);
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(t.mutable_data(), data_, size_t(nbytes()));
  return t;
}

std::vector<float> Tensor::to_floats() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  if (!out.empty()) iron::to_f32(dtype_, data_, out.data(), numel());
  return out;
}

std::vector<int32_t> Tensor::to_ints() const {
  std::vector<int32_t> out(static_cast<size_t>(numel()));
  if (dtype_ == i32) {
    if (!out.empty()) std::memcpy(out.data(), data_, out.size() * 4);
    return out;
  }
  std::vector<float> f = to_floats();
  for (size_t i = 0; i < f.size(); ++i) out[i] = int32_t(f[i]);
  return out;
}

float Tensor::item(int64_t flat) const {
  if (flat < 0 || flat >= numel())
    index_error("element " + std::to_string(flat) + " is outside " + to_string(shape_));
  if (info(dtype_).quantised) value_error("item() of a block-quantised tensor");
  float out;
  size_t size = size_t(info(dtype_).bytes);
  iron::to_f32(dtype_, static_cast<const char*>(data_) + size_t(flat) * size, &out, 1);
  return out;
}

}  // namespace iron
