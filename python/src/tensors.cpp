// numpy arrays <-> iron::Tensor, and the dtypes.
#include <cstring>
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.hpp"

// numpy's C API, in this file alone: the fast paths of the calls (no Python-level calls to make
// an array or read one).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
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

}  // namespace

namespace {

/// ml_dtypes.bfloat16 as a numpy dtype, or null where ml_dtypes cannot be imported: numpy has no
/// bfloat16 of its own, and ml_dtypes' is the one jax and torch's numpy interop use. Looked up on
/// first need, not at `import iron`, which stays light. Called with the GIL held; no C++ lock
/// guards it, since the import may let another thread run (which then looks it up as well).
PyArray_Descr* bfloat16_descr() {
  static bool looked_up = false;
  static PyArray_Descr* descr = nullptr;
  if (looked_up) return descr;
  PyArray_Descr* found = nullptr;
  try {
    nb::object type = nb::module_::import_("ml_dtypes").attr("bfloat16");
    if (PyArray_DescrConverter(type.ptr(), &found) != NPY_SUCCEED) {
      PyErr_Clear();
      found = nullptr;
    }
  } catch (const nb::python_error&) {
    found = nullptr;  // not installed (or broken): bf16 arrays are float32
  }
  descr = found;  // a reference kept for the process's life
  looked_up = true;
  return descr;
}

bool numpy_dtype(int typenum, DType& t) {
  switch (typenum) {
    case NPY_FLOAT32: t = f32; return true;
    case NPY_FLOAT16: t = f16; return true;
    case NPY_INT32: t = i32; return true;
    case NPY_INT8: t = i8; return true;
    default:
      // A dtype registered at run time: ml_dtypes' bfloat16, if that is the one.
      if (typenum >= NPY_USERDEF) {
        PyArray_Descr* bf = bfloat16_descr();
        if (bf && bf->type_num == typenum) {
          t = bf16;
          return true;
        }
      }
      return false;
  }
}

int numpy_typenum(DType t) {
  switch (t) {
    case DType::f16: return NPY_FLOAT16;
    case DType::i32: return NPY_INT32;
    case DType::i8: return NPY_INT8;
    default: return NPY_FLOAT32;
  }
}

}  // namespace

Tensor tensor_from(nb::handle array, bool keep, std::vector<Array>* hold) {
  // A C-contiguous, aligned numpy array of a dtype IRON takes: viewed as it is.
  if (PyArray_Check(array.ptr())) {
    auto* arr = reinterpret_cast<PyArrayObject*>(array.ptr());
    DType t;
    if (PyArray_IS_C_CONTIGUOUS(arr) && PyArray_ISALIGNED(arr) && numpy_dtype(PyArray_TYPE(arr), t)) {
      const int nd = PyArray_NDIM(arr);
      const npy_intp* dims = PyArray_DIMS(arr);
      Shape shape(dims, dims + nd);
      std::shared_ptr<const void> keepalive;
      if (keep) {
        Py_INCREF(array.ptr());
        keepalive = std::shared_ptr<const void>(array.ptr(), [](const void* p) {
          nb::gil_scoped_acquire gil;
          Py_DECREF(static_cast<PyObject*>(const_cast<void*>(p)));
        });
      }
      return Tensor::borrow(PyArray_DATA(arr), shape, t, std::move(keepalive));
    }
  }
  // Anything else numpy can give as such an array (a strided view, a list, a DLPack tensor):
  // converted by nanobind, a copy where needed.
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
  PyArray_Descr* descr = t.dtype() == bf16 ? bfloat16_descr() : nullptr;
  if (descr) {
    Py_INCREF(descr);  // the array takes this reference
  } else {
    if (t.dtype() != f32 && t.dtype() != f16 && t.dtype() != i32 && t.dtype() != i8) {
      t = t.to(f32);  // block kinds, and bf16 without ml_dtypes
      copy = true;
    }
    descr = PyArray_DescrFromType(numpy_typenum(t.dtype()));
  }
  npy_intp dims[NPY_MAXDIMS];
  const int nd = t.rank();
  if (nd > NPY_MAXDIMS) {
    Py_DECREF(descr);
    value_error("a tensor of rank " + std::to_string(nd) + " has no numpy array");
  }
  for (int i = 0; i < nd; ++i) dims[i] = npy_intp(t.shape()[size_t(i)]);
  // PyArray_NewFromDescr takes the reference to descr, also when it fails.
  if (copy || !owner.is_valid()) {
    PyObject* a = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr, nullptr, 0, nullptr);
    if (!a) throw nb::python_error();
    if (t.nbytes() > 0) std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(a)), t.data(), size_t(t.nbytes()));
    return nb::steal(a);
  }
  int flags = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | (writable ? NPY_ARRAY_WRITEABLE : 0);
  PyObject* a = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr, const_cast<void*>(t.data()), flags,
                                     nullptr);
  if (!a) throw nb::python_error();
  nb::object view = nb::steal(a);
  // The owner (a version, or None for a host step's view) keeps the memory alive.
  Py_INCREF(owner.ptr());
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(a), owner.ptr()) < 0) throw nb::python_error();
  return view;
}

void bind_tensors(nb::module_& m) {
  if (_import_array() < 0) throw nb::python_error();
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
