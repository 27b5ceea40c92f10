// Per-call values (Scratchpad, Carried) and their integer expressions (Affine), with Python's
// arithmetic: `position + 1`, `n // 2`, `iron.clamp(position, 0, limit)`.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "iron/handle.hpp"
#include "iron/value.hpp"

namespace iron::python {

void bind_values(nb::module_& m) {
  nb::class_<Affine> affine(m, "Affine",
                            "An integer expression of at most one per-call value: the value (or 0), then "
                            "each step in order (multiply, add, floor-divide, shift right, clamp).");
  affine.def(nb::init<int64_t>(), nb::arg("constant") = 0)
      .def(nb::init<const PerCall&>())
      .def_prop_ro("is_constant", &Affine::is_constant)
      .def_prop_ro("value_name", &Affine::value_name)
      .def("constant", &Affine::constant)
      .def("range", &Affine::range, "The least and greatest this can be for a value in [lo, hi].")
      .def("clamp", &Affine::clamp, nb::arg("lo").none() = nb::none(), nb::arg("hi").none() = nb::none())
      .def("__add__", [](const Affine& a, int64_t b) { return a + b; }, nb::is_operator())
      .def("__radd__", [](const Affine& a, int64_t b) { return b + a; }, nb::is_operator())
      .def("__sub__", [](const Affine& a, int64_t b) { return a - b; }, nb::is_operator())
      .def("__mul__", [](const Affine& a, int64_t b) { return a * b; }, nb::is_operator())
      .def("__rmul__", [](const Affine& a, int64_t b) { return b * a; }, nb::is_operator())
      .def("__floordiv__", [](const Affine& a, int64_t b) { return a / b; }, nb::is_operator())
      .def("__rshift__", [](const Affine& a, int b) { return a >> b; }, nb::is_operator())
      .def("__eq__", [](const Affine& a, const Affine& b) { return a == b; }, nb::is_operator())
      .def("__hash__", [](const Affine& a) { return std::hash<std::string>()(a.str()); })
      .def("__repr__", [](const Affine& a) { return "Affine(" + a.str() + ")"; })
      .def("__str__", &Affine::str);
  nb::implicitly_convertible<int64_t, Affine>();

  nb::class_<PerCall> per_call(m, "PerCall", "A per-call value a graph declares.");
  per_call.def_ro("name", &PerCall::name)
      .def("affine", [](const PerCall& p) { return Affine(p); })
      .def("__add__", [](const PerCall& a, int64_t b) { return Affine(a) + b; }, nb::is_operator())
      .def("__radd__", [](const PerCall& a, int64_t b) { return b + Affine(a); }, nb::is_operator())
      .def("__sub__", [](const PerCall& a, int64_t b) { return Affine(a) - b; }, nb::is_operator())
      .def("__mul__", [](const PerCall& a, int64_t b) { return Affine(a) * b; }, nb::is_operator())
      .def("__rmul__", [](const PerCall& a, int64_t b) { return b * Affine(a); }, nb::is_operator())
      .def("__floordiv__", [](const PerCall& a, int64_t b) { return Affine(a) / b; }, nb::is_operator())
      .def("__rshift__", [](const PerCall& a, int b) { return Affine(a) >> b; }, nb::is_operator())
      .def("clamp", [](const PerCall& a, std::optional<int64_t> lo, std::optional<int64_t> hi) {
             return Affine(a).clamp(lo, hi);
           }, nb::arg("lo").none() = nb::none(), nb::arg("hi").none() = nb::none())
      .def("__repr__", [](const PerCall& p) { return "<per-call value " + p.name + ">"; });
  // The spec's Scratchpad and Carried are typing.Annotated aliases, so a body is annotated
  // `rows: iron.Scratchpad[int]`: subscripting gives that Annotated form, which iron.Graph reads as
  // the bare class. Defined here, not from Python: a Python function in a nanobind type's dict
  // keeps the module alive past nanobind's leak check at exit.
  auto annotated = [](const char* kind) {
    return [kind](nb::handle item) {
      return nb::module_::import_("typing").attr("Annotated")[nb::make_tuple(item, kind)];
    };
  };
  nb::class_<Scratchpad, PerCall>(m, "Scratchpad",
                                  "A per-call value the host writes each call (annotate a keyword-only "
                                  "parameter of body with it, bare or as the spec's Scratchpad[int]).")
      .def_static("__class_getitem__", annotated("scratchpad"), nb::arg("item"));
  nb::class_<Carried, PerCall>(m, "Carried",
                               "A per-call value the graph computes for its next call, returned with "
                               "iron.carry(); the host seeds only the first call (annotate bare or as "
                               "Carried[int]).")
      .def_static("__class_getitem__", annotated("carried"), nb::arg("item"));
  nb::implicitly_convertible<Scratchpad, Affine>();
  nb::implicitly_convertible<Carried, Affine>();
  nb::implicitly_convertible<PerCall, Affine>();

  m.def("clamp", [](const Affine& x, std::optional<int64_t> lo, std::optional<int64_t> hi) { return clamp(x, lo, hi); },
        nb::arg("x"), nb::arg("lo").none() = nb::none(), nb::arg("hi").none() = nb::none(),
        "A per-call value's expression held to [lo, hi]; a bound of None is none.");

  nb::class_<Index>(m, "Index", "One axis of an index (upto, at, window, range).");
  m.def("upto", &upto, "The leading n entries are valid this call (x[:n] with n per call).");
  m.def("at", &at, "The entry at a per-call index (keys[:, pos]).");
  m.def("window", &window, "length entries from a per-call start (cache[start : start + length]).");
  m.def("range", &range, nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1);
  m.def("_integer", [](int64_t i) { return Index(i); });
  m.def("_all", []() { return all; });
}

}  // namespace iron::python
