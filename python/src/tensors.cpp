// numpy arrays <-> iron::Tensor, and the dtypes.
#include <cstring>
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "iron/dtype.hpp"
#include "iron/error.hpp"
#include "iron/module.hpp"

namespace iron::python {

std::mutex& device_mutex() {
  static std::mutex m;
  return m;
}

namespace {

DType dtype_of(const nb::dlpack::dtype& d) {
  using Code = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(Code::Float) && d.bits == 32) return f32;
    if (d.code == uint8_t(Code::Float) && d.bits == 16) return f16;
    if (d.code == uint8_t(Code::Bfloat) && d.bits == 16) return bf16;
    if (d.code == uint8_t(Code::Int) && d.bits == 32) return i32;
    if (d.code == uint8_t(Code::Int) && d.bits == 8) return i8;
  }
  type_error("an array of dtype code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
             " bits: IRON takes float32, float16, bfloat16, int32 and int8 arrays");
}

nb::dlpack::dtype dlpack_of(DType t) {
  switch (t) {
    case DType::f16: {
      nb::dlpack::dtype d;
      d.code = uint8_t(nb::dlpack::dtype_code::Float);
      d.bits = 16;
      d.lanes = 1;
      return d;
    }
    case DType::i32: return nb::dtype<int32_t>();
    case DType::i8: return nb::dtype<int8_t>();
    default: return nb::dtype<float>();
  }
}

}  // namespace

Tensor tensor_from(nb::handle array, bool keep, std::vector<Array>* hold) {
  Array a;
  if (!nb::try_cast<Array>(array, a, /*convert=*/true))
    type_error(std::string("expected an array (float32, float16, int32 or int8), got ") +
               nb::type_name(array.type()).c_str());
  Shape shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = int64_t(a.shape(i));
  DType t = dtype_of(a.dtype());
  std::shared_ptr<const void> keepalive;
  if (keep) {
    // The array (or the contiguous copy made of it) stays alive as long as the tensor; the last
    // reference may drop on a device thread, so it takes the GIL to let go.
    keepalive = std::shared_ptr<const void>(new Array(a), [](const void* p) {
      nb::gil_scoped_acquire gil;
      delete static_cast<const Array*>(p);
    });
  }
  const void* data = a.data();
  if (hold) hold->push_back(std::move(a));
  return Tensor::borrow(data, shape, t, std::move(keepalive));
}

nb::object array_from(const Tensor& given, bool copy, nb::handle owner, bool writable) {
  Tensor t = given;
  if (t.dtype() != f32 && t.dtype() != f16 && t.dtype() != i32 && t.dtype() != i8) {
    t = t.to(f32);
    copy = false;  // the conversion is a copy already; its tensor owns it below
    owner = nb::handle();
  }
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  if (copy || !owner.is_valid()) {
    auto* held = new Tensor(copy ? t.clone() : t);
    nb::capsule free_it(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    void* data = const_cast<void*>(held->data());
    return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), free_it, nullptr, dlpack_of(t.dtype()))
        .cast(nb::rv_policy::reference);
  }
  nb::object view = nb::ndarray<nb::numpy>(const_cast<void*>(t.data()), shape.size(), shape.data(), owner,
                                           nullptr, dlpack_of(t.dtype()))
                        .cast(nb::rv_policy::reference);
  if (!writable) view.attr("flags").attr("writeable") = false;
  return view;
}

void bind_tensors(nb::module_& m) {
  nb::enum_<DType>(m, "DType", "Element types, as the C++ iron::DType.")
      .value("f32", DType::f32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("i8", DType::i8)
      .value("i32", DType::i32)
      .value("q8_0", DType::q8_0)
      .value("q4_0", DType::q4_0)
      .value("q4_1", DType::q4_1)
      .value("q4_k", DType::q4_k)
      .value("q6_k", DType::q6_k)
      .value("q5_0", DType::q5_0)
      .value("q5_1", DType::q5_1)
      .value("q5_k", DType::q5_k)
      .value("keep", keep_dtype);
  m.def("dtype_from_name", [](const std::string& n) { return dtype_from_name(n); });
  m.def("dtype_name", [](DType t) { return std::string(t == keep_dtype ? "keep" : name(t)); });
  // For tests: an array through a Tensor and back.
  m.def("_roundtrip", [](nb::handle a, bool copy) { return array_from(tensor_from(a, true), copy); });
}

}  // namespace iron::python
