// iron::functional, for iron.functional (python/iron/functional.py) to give torch's signatures.
// An absent optional handle (a bias, a weight, `into`) is None.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/variant.h>

#include "bindings.hpp"
#include "iron/functional.hpp"

namespace iron::python {
namespace {
namespace F = iron::functional;
using OptHandle = std::optional<Handle>;
Handle h(const OptHandle& x) { return x ? *x : Handle(); }

Fields fields_of(const nb::dict& d) {
  Fields f;
  for (auto [k, v] : d) {
    std::string name = nb::cast<std::string>(k);
    if (PyBool_Check(v.ptr())) f.set(name, nb::cast<bool>(v));
    else if (PyLong_Check(v.ptr())) f.set(name, nb::cast<int64_t>(v));
    else if (PyFloat_Check(v.ptr())) f.set(name, nb::cast<double>(v));
    else f.set(name, nb::cast<std::string>(v));
  }
  return f;
}
}  // namespace

Fields fields_from(const nb::dict& d) { return fields_of(d); }

void bind_functional(nb::module_& m) {
  nb::module_ f = m.def_submodule("functional", "iron::functional (use iron.functional).");
  f.def("linear", [](const Handle& x, const Handle& w, const OptHandle& b, Precision p, const nb::dict& gemv,
                     const OptHandle& into) { return F::linear(x, w, h(b), p, fields_of(gemv), h(into)); },
        nb::arg("x"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("precision"), nb::arg("gemv"),
        nb::arg("into").none());
  f.def("linear_residual", [](const Handle& x, const Handle& w, const Handle& r, Precision p) {
    return F::linear_residual(x, w, r, p);
  });
  f.def("rms_norm", [](const Handle& x, int64_t n, const OptHandle& w, std::optional<double> eps) {
    return F::rms_norm(x, n, h(w), eps);
  }, nb::arg("x"), nb::arg("normalized_shape"), nb::arg("weight").none(), nb::arg("eps").none());
  f.def("layer_norm", [](const Handle& x, int64_t n, const OptHandle& w, const OptHandle& b, double eps) {
    return F::layer_norm(x, n, h(w), h(b), eps);
  }, nb::arg("x"), nb::arg("normalized_shape"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("eps"));
  f.def("silu", &F::silu);
  f.def("gelu", &F::gelu);
  f.def("rope", &F::rope);
  f.def("rope_cos_sin", [](const Handle& x, const Handle& t, const std::string& mode, const OptHandle& into) {
    return F::rope_cos_sin(x, t, mode, h(into));
  }, nb::arg("x"), nb::arg("table"), nb::arg("mode"), nb::arg("into").none());
  f.def("silu_mul", &F::silu_mul);
  f.def("gelu_tanh_mul", &F::gelu_tanh_mul);
  f.def("softmax", &F::softmax);
  f.def("argmax", &F::argmax);
  // Settings fixed at compile time, or read each call from a settings row (F::sample_settings).
  f.def("sample", nb::overload_cast<const Handle&, double, int64_t, double, uint64_t, const Affine&, const Affine&>(&F::sample));
  f.def("sample", nb::overload_cast<const Handle&, const Handle&, const Affine&, const Affine&>(&F::sample));
  f.def("scalar", &F::scalar);
  f.def("attention", &F::attention, nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("start"),
        nb::arg("scale").none(), nb::arg("window"), nb::arg("precision"));
  f.def("copy", &F::copy, nb::arg("x"), nb::arg("dtype").none());

  f.def("segment_attention", &F::segment_attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("lengths"),
        nb::arg("segment"), nb::arg("scale").none(), nb::arg("window"), nb::arg("precision"));
  f.def("segment_mean", &F::segment_mean, nb::arg("x"), nb::arg("lengths"), nb::arg("segment"));
  f.def("slot_rows", &F::slot_rows, nb::arg("slots"), nb::arg("positions"), nb::arg("slots_count"),
        nb::arg("slot_rows"));
  f.def("slot_attention", &F::slot_attention, nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"),
        nb::arg("positions"), nb::arg("slots"), nb::arg("slot_rows"), nb::arg("scale").none(), nb::arg("window"),
        nb::arg("precision"));
  f.def("sample_rows", &F::sample_rows, nb::arg("logits"), nb::arg("settings"), nb::arg("steps"),
        nb::arg("positions"));
  // The row as a numpy int32 array the caller owns: it is fed to a call as an input's data.
  f.def("sample_settings", [](double temperature, int64_t top_k, double top_p, uint64_t seed) {
    return array_from(F::sample_settings(temperature, top_k, top_p, seed), true);
  }, nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"));
  // ConvState's window and tail are states: a Python iron.State passes the C++ Held it declared
  // (python/iron/functional.py checks which kind it is), taken here as the State it is.
  f.def("causal_conv1d", [](const Handle& x, const Handle& taps, const Handle& read, const Handle& write,
                            const Held& window, const Held& tail) {
    return F::causal_conv1d(x, taps, F::ConvState{read, write, State(window.resident()), State(tail.resident())});
  }, nb::arg("x"), nb::arg("taps"), nb::arg("read"), nb::arg("write"), nb::arg("window"), nb::arg("tail"));
}

}  // namespace iron::python
