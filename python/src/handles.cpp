// Handles: numpy's basic indexing (x[:n] with a per-call n, keys[:, pos], cache[start : start +
// 1], table[ids]), reshape and transpose, + - * / and @, and assignment into a view.
#include <algorithm>
#include <limits>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "iron/error.hpp"
#include "iron/handle.hpp"

namespace iron::python {
namespace {

bool is_value(nb::handle o) { return nb::isinstance<PerCall>(o) || nb::isinstance<Affine>(o); }
Affine affine_of(nb::handle o) {
  if (nb::isinstance<PerCall>(o)) return Affine(nb::cast<const PerCall&>(o));
  return nb::cast<Affine>(o);
}

/// One axis of a Python key.
Index index_of(nb::handle k) {
  if (nb::isinstance<Index>(k)) return nb::cast<Index>(k);
  if (PyLong_Check(k.ptr())) return Index(nb::cast<int64_t>(k));
  if (is_value(k)) return at(affine_of(k));
  if (PySlice_Check(k.ptr())) {
    nb::object start = k.attr("start"), stop = k.attr("stop"), step = k.attr("step");
    if (start.is_none() && stop.is_none() && step.is_none()) return all;
    if (!step.is_none() && (is_value(start) || is_value(stop)))
      type_error("a slice with a per-call bound takes no step");
    if (start.is_none() && is_value(stop)) return upto(affine_of(stop));
    if (is_value(start)) {
      // cache[start : start + length]: the length must be a constant.
      Affine a = affine_of(start), b = is_value(stop) ? affine_of(stop) : Affine(0);
      // The stop is the start's expression with a larger last addition (position + 1 :
      // position + 2), or that expression plus a constant.
      if (!stop.is_none() && a.slot() == b.slot() && !b.steps().empty() && b.steps().back().op == Affine::Op::add) {
        const auto &sa = a.steps(), &sb = b.steps();
        int64_t length = 0;
        if (sb.size() == sa.size() + 1 && std::equal(sa.begin(), sa.end(), sb.begin()))
          length = sb.back().operand;
        else if (sb.size() == sa.size() && std::equal(sa.begin(), sa.end() - 1, sb.begin()) &&
                 sa.back().op == Affine::Op::add)
          length = sb.back().operand - sa.back().operand;
        if (length > 0) return window(a, length);
      }
      type_error("a per-call slice start takes a stop of start + length, length a positive constant (got " +
                 a.str() + " : " + (stop.is_none() ? std::string("end") : b.str()) + ")");
    }
    int64_t s = start.is_none() ? 0 : nb::cast<int64_t>(start);
    int64_t e = stop.is_none() ? std::numeric_limits<int64_t>::max() : nb::cast<int64_t>(stop);
    int64_t st = step.is_none() ? 1 : nb::cast<int64_t>(step);
    return range(s, e, st);
  }
  type_error(std::string("a handle is indexed by ints, slices, per-call values and iron.upto/at/window, not ") +
             nb::type_name(k.type()).c_str());
}

std::vector<Index> indices_of(const Handle& h, nb::handle key) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle k : nb::borrow<nb::tuple>(key)) items.push_back(k);
  } else {
    items.push_back(key);
  }
  std::vector<Index> out;
  for (size_t axis = 0; axis < items.size(); ++axis) {
    Index i = index_of(items[axis]);
    // An open stop is the axis's end.
    if (i.kind == Index::Kind::range && i.stop == std::numeric_limits<int64_t>::max() && int(axis) < h.rank())
      i.stop = h.dim(int(axis));
    out.push_back(i);
  }
  return out;
}

Handle index_all(const Handle& h, const std::vector<Index>& idx) {
  if (idx.size() == 1) return h[idx[0]];
  // operator[](initializer_list) is the only several-axis form: dispatch by count.
  switch (idx.size()) {
    case 2: return h[{idx[0], idx[1]}];
    case 3: return h[{idx[0], idx[1], idx[2]}];
    case 4: return h[{idx[0], idx[1], idx[2], idx[3]}];
    default: index_error("a handle takes at most 4 indices, got " + std::to_string(idx.size()));
  }
}

}  // namespace

Handle index_handle(const Handle& h, nb::handle key) {
  if (nb::isinstance<Handle>(key)) return h[nb::cast<const Handle&>(key)];
  if (PyList_Check(key.ptr())) return h.rows(nb::cast<std::vector<int64_t>>(key));
  return index_all(h, indices_of(h, key));
}

void bind_handles(nb::module_& m) {
  nb::class_<AccessPattern>(m, "AccessPattern", "A walk of up to four dimensions over a buffer: offset, "
                                                "then sizes and element strides.")
      .def(nb::init<>())
      .def("__init__", [](AccessPattern* p, int64_t offset, const Shape& sizes, const Shape& strides) {
        new (p) AccessPattern{offset, sizes, strides};
      }, nb::arg("offset"), nb::arg("sizes"), nb::arg("strides"))
      .def_rw("offset", &AccessPattern::offset)
      .def_rw("sizes", &AccessPattern::sizes)
      .def_rw("strides", &AccessPattern::strides)
      .def_static("full", &AccessPattern::full);
  nb::class_<Handle>(m, "Handle",
                     "A recorded tensor: a place in a graph buffer, a shape, a dtype, a per-axis bound "
                     "valid this call, and a layout. Operators called on handles record steps.\n\n"
                     "Of the spec's Handle, Handle.whole and Handle.ref are not bound: they are how the "
                     "recorder makes a buffer and how a step finds one, which the C++ recorder does; "
                     "Handle.layout and Handle.buffer are not exposed either (name, shape, dtype, an "
                     "iron.DType, and valid are). at() takes one AccessPattern, not a tuple of patterns "
                     "with a repeat each; its repeat and length are per-call bounds on the view's first "
                     "and second axes (docs/design.md), so bounds may not name an axis they bound.")
      .def(nb::init<>())
      .def_prop_ro("shape", [](const Handle& h) { return nb::tuple(nb::cast(h.shape())); })
      .def_prop_ro("dtype", &Handle::dtype)
      .def_prop_ro("rank", &Handle::rank)
      .def_prop_ro("name", &Handle::name)
      .def_prop_ro("defined", &Handle::defined)
      .def_prop_ro("valid", [](const Handle& h) {
        nb::dict d;
        for (int a = 0; a < h.rank(); ++a)
          if (h.valid(a)) d[nb::int_(a)] = nb::cast(*h.valid(a));
        return d;
      }, "Per axis, the expression of the leading entries valid this call (x[:n]).")
      .def("__len__", [](const Handle& h) {
        if (h.rank() == 0) type_error("len() of a 0-d handle");
        return h.dim(0);
      })
      .def("__repr__", &Handle::str)
      .def("__getitem__", &index_handle)
      .def("__setitem__", [](const Handle& h, nb::handle key, const Handle& src) { index_handle(h, key).assign(src); },
           "Records a copy of the source into this view (numpy's view[...] = source).")
      .def("reshape", [](const Handle& h, nb::args shape) {
        Shape s;
        if (shape.size() == 1 && !PyLong_Check(shape[0].ptr())) s = nb::cast<Shape>(shape[0]);
        else for (nb::handle d : shape) s.push_back(nb::cast<int64_t>(d));
        return h.reshape(s);
      }, "The same buffer seen with another shape (no data moves).")
      .def("transpose", [](const Handle& h, nb::args axes) {
        std::vector<int> a;
        if (axes.size() == 1 && !PyLong_Check(axes[0].ptr())) a = nb::cast<std::vector<int>>(axes[0]);
        else for (nb::handle d : axes) a.push_back(nb::cast<int>(d));
        if (a.empty()) for (int i = h.rank() - 1; i >= 0; --i) a.push_back(i);
        return h.transpose(a);
      }, "The same buffer walked with its axes permuted (no data moves).")
      .def_prop_ro("T", &Handle::T)
      .def("at", [](const Handle& h, const AccessPattern& tap, const Shape& shape, const nb::handle bounds,
                    const std::optional<Affine>& repeat, const std::optional<Affine>& length) {
        std::vector<std::pair<int, Affine>> b;
        if (!bounds.is_none())
          for (auto [axis, n] : nb::borrow<nb::dict>(bounds)) b.emplace_back(nb::cast<int>(axis), affine_of(n));
        return h.at(tap, shape, b, repeat, length);
      }, nb::arg("tap"), nb::arg("shape"), nb::kw_only(), nb::arg("bounds").none() = nb::none(),
         nb::arg("repeat").none() = nb::none(), nb::arg("length").none() = nb::none(),
         "What tap walks, seen as shape (a slice when contiguous, else a strided view); bounds {axis: n} "
         "gives per-call bounds, repeat runs the walk's first dimension that many times per call and "
         "length takes that many entries of its second. Past the length nothing is defined (the device "
         "moves only those entries): results are cut to it, as to any bound.")
      .def("bounded", &Handle::bounded, nb::arg("axis"), nb::arg("n"),
           "The same handle with a per-call bound on axis: its leading n entries are valid this call.")
      .def("__add__", [](const Handle& a, const Handle& b) { return a + b; }, nb::is_operator())
      .def("__sub__", [](const Handle& a, const Handle& b) { return a - b; }, nb::is_operator())
      .def("__mul__", [](const Handle& a, const Handle& b) { return a * b; }, nb::is_operator())
      .def("__truediv__", [](const Handle& a, const Handle& b) { return a / b; }, nb::is_operator())
      .def("__matmul__", [](const Handle& a, const Handle& b) { return matmul(a, b); }, nb::is_operator())
      .def("__radd__", [](const Handle& a, const Handle& b) { return b + a; }, nb::is_operator())
      .def("__rsub__", [](const Handle& a, const Handle& b) { return b - a; }, nb::is_operator())
      .def("__rmul__", [](const Handle& a, const Handle& b) { return b * a; }, nb::is_operator())
      .def("__rtruediv__", [](const Handle& a, const Handle& b) { return b / a; }, nb::is_operator())
      .def("__rmatmul__", [](const Handle& a, const Handle& b) { return matmul(b, a); }, nb::is_operator());
}

}  // namespace iron::python
