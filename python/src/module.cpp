// The extension module iron._iron: each area's bindings are in a file of their own; the
// package iron (python/iron/) gives them the spec's Python names and signatures.
#include "bindings.hpp"

NB_MODULE(_iron, m) {
  m.doc() = "IRON's C++ core; import iron, not this.";
  iron::python::bind_errors(m);
  iron::python::bind_tensors(m);
  iron::python::bind_values(m);
  iron::python::bind_handles(m);
  iron::python::bind_functional(m);
  iron::python::bind_graph(m);
  iron::python::bind_models(m);
  iron::python::bind_engine(m);
  iron::python::bind_conversation(m);
  iron::python::bind_encoder(m);
  iron::python::bind_api(m);
}
