// iron::Error arrives in Python as the spec's exception types, with the C++ message.
#include "bindings.hpp"
#include "iron/error.hpp"

namespace iron::python {

void bind_errors(nb::module_& m) {
  (void)m;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      switch (e.kind()) {
        case ErrorKind::value: PyErr_SetString(PyExc_ValueError, e.what()); break;
        case ErrorKind::type: PyErr_SetString(PyExc_TypeError, e.what()); break;
        case ErrorKind::index: PyErr_SetString(PyExc_IndexError, e.what()); break;
        case ErrorKind::io: PyErr_SetString(PyExc_OSError, e.what()); break;
      }
    }
  });
}

}  // namespace iron::python
