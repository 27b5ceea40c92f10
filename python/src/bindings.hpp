// What each file of the bindings defines, for module.cpp to call in order, and the conversions
// between numpy arrays and iron::Tensor they share.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "iron/precision.hpp"
#include "iron/tensor.hpp"

// iron::Precision crosses as its name: Python's iron.Precision is a StrEnum (the spec's), so
// Precision.HIGHEST == "highest", and a plain string serves too (python/iron/graph.py checks a
// name before it gets here; one the caster does not know is a TypeError naming the argument).
namespace nanobind::detail {
template <>
struct type_caster<iron::Precision> {
  NB_TYPE_CASTER(iron::Precision, const_name("str"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_Check(src.ptr()) ? PyUnicode_AsUTF8AndSize(src.ptr(), &size) : nullptr;
    if (!text) {
      PyErr_Clear();
      return false;
    }
    const std::string_view name(text, size_t(size));
    for (iron::Precision p : {iron::Precision::highest, iron::Precision::high, iron::Precision::medium})
      if (iron::name(p) == name) {
        value = p;
        return true;
      }
    return false;
  }
  static handle from_cpp(iron::Precision p, rv_policy, cleanup_list*) noexcept {
    const std::string_view name = iron::name(p);
    return PyUnicode_FromStringAndSize(name.data(), Py_ssize_t(name.size()));
  }
};
}  // namespace nanobind::detail

namespace iron::models {
struct GenerateStats;
class LlamaRunner;
}

namespace iron::python {
namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_tensors(nb::module_& m);
void bind_values(nb::module_& m);
void bind_handles(nb::module_& m);
void bind_functional(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_models(nb::module_& m);
void bind_engine(nb::module_& m);
/// After bind_engine: iron.Conversation's classes, in its submodule.
void bind_conversation(nb::module_& m);
void bind_encoder(nb::module_& m);
void bind_api(nb::module_& m);

/// A decoder opened to serve `parallel` sequences at once (a KV-cache slot each, `context` rows):
/// what iron.Engine and iron.Api run. Call it with the GIL released.
std::shared_ptr<models::LlamaRunner> open_serving_runner(const std::string& path, int parallel, int64_t context,
                                                         int64_t chunk, int threads, const std::string& device,
                                                         Precision precision);

/// A generation's counts, times and stop as a dict (prompt_tokens, prompt_seconds,
/// generated_tokens, generate_seconds, stop): what Runner.generate returns and Stream.stats holds.
nb::dict stats_dict(const models::GenerateStats& s);

/// A host tensor viewing a numpy array (any object numpy can give as a C-contiguous CPU array):
/// no copy when the array is contiguous already. `keep` holds a reference to the array for as
/// long as the tensor is kept (a bound param); without it the view is valid while the caller
/// holds the array (a call's inputs).
/// `hold`, when given, keeps the array (or the contiguous copy made of it) for the caller.
using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
Tensor tensor_from(nb::handle array, bool keep, std::vector<Array>* hold = nullptr);
/// A numpy array of `t`: a copy it owns, or (copy false) a view `owner` keeps alive. bf16 comes
/// back as ml_dtypes.bfloat16 where ml_dtypes can be imported, else as float32 (numpy has no
/// bfloat16); quantised kinds as float32. tensor_from() takes ml_dtypes.bfloat16 arrays as bf16.
nb::object array_from(const Tensor& t, bool copy, nb::handle owner = nb::handle(), bool writable = false);

/// Calls into the devices are serialised: the CPU device's process-wide thread pool runs one
/// run at a time, so two Python threads calling two graphs take turns here (with the GIL
/// released, so other Python threads go on meanwhile).
std::mutex& device_mutex();

}  // namespace iron::python
