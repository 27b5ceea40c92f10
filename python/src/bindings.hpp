// What each file of the bindings defines, for module.cpp to call in order, and the conversions
// between numpy arrays and iron::Tensor they share.
#pragma once

#include <mutex>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "iron/tensor.hpp"

namespace iron::python {
namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_tensors(nb::module_& m);
void bind_values(nb::module_& m);
void bind_handles(nb::module_& m);
void bind_functional(nb::module_& m);
void bind_graph(nb::module_& m);
void bind_models(nb::module_& m);

/// A host tensor viewing a numpy array (any object numpy can give as a C-contiguous CPU array):
/// no copy when the array is contiguous already. `keep` holds a reference to the array for as
/// long as the tensor is kept (a bound param); without it the view is valid while the caller
/// holds the array (a call's inputs).
/// `hold`, when given, keeps the array (or the contiguous copy made of it) for the caller.
using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
Tensor tensor_from(nb::handle array, bool keep, std::vector<Array>* hold = nullptr);
/// A numpy array of `t`: a copy it owns, or (copy false) a view `owner` keeps alive. bf16 comes
/// back as float32 (numpy has no bfloat16); quantised kinds as float32 too.
nb::object array_from(const Tensor& t, bool copy, nb::handle owner = nb::handle(), bool writable = false);

/// Calls into the devices are serialised: the CPU device's process-wide thread pool runs one
/// run at a time, so two Python threads calling two graphs take turns here (with the GIL
/// released, so other Python threads go on meanwhile).
std::mutex& device_mutex();

}  // namespace iron::python
