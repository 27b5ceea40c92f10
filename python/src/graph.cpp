// Graphs from Python: a PyGraph is an iron::Graph whose body() calls back into the Python
// iron.Graph that owns it (python/iron/graph.py reads body's signature and walks the modules);
// its versions are called with numpy arrays, the GIL released while they run.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.hpp"
#include "iron/carried_loop.hpp"
#include "iron/error.hpp"
#include "iron/graph.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/profile.hpp"

namespace iron::python {

Fields fields_from(const nb::dict& d);

namespace {

/// The held tensor `x` names: an iron.Held, or the Python param, weight or state wrapping one (a
/// graph's attribute, `self.cache = iron.state(...)`), for `what` ("read", "push").
const Held& held_of(nb::handle x, const char* what) {
  if (nb::isinstance<Held>(x)) return nb::cast<const Held&>(x);
  if (nb::hasattr(x, "_held")) {
    nb::object inner = x.attr("_held");
    if (nb::isinstance<Held>(inner)) return nb::cast<const Held&>(inner);
    if (inner.is_none())
      throw nb::type_error((std::string(what) + "(x): x is not held by this graph (declare it as an attribute)").c_str());
  }
  throw nb::type_error((std::string(what) + "(x): x is a param, weight or state the graph holds, not " +
                        nb::cast<std::string>(nb::str(nb::type_name(x.type()))))
                           .c_str());
}

/// An operator named by its class (the spec's Profile.add(cls, ...)) or by its name.
std::string operator_name(nb::handle cls) {
  if (nb::isinstance<nb::str>(cls)) return nb::cast<std::string>(cls);
  if (nb::hasattr(cls, "__name__")) return nb::cast<std::string>(cls.attr("__name__"));
  throw nb::type_error("an operator is named by its class or its name (a str)");
}

/// What a Python module declares, by name: params, weights, states, children.
template <class Base>
class Holder : public Base {
 public:
  using Base::Base;
  Held add_param(const std::string& name, const Shape& shape, DType dtype) { return this->param(name, shape, dtype); }
  Held add_param_value(const std::string& name, nb::handle array) {
    return this->param(name, tensor_from(array, true));
  }
  Held add_weight(const std::string& name, nb::handle array) { return this->weight(name, tensor_from(array, true)); }
  Held add_state(const std::string& name, const Shape& shape, DType dtype) { return this->state(name, shape, dtype); }
  Held add_tie(const std::string& name, const Held& other) {
    if (!other.resident()) value_error("tie('" + name + "') to an undeclared param");
    return this->tie(name, Param(other.resident()));
  }
  /// A child module at `name`, kept by the root graph.
  Module* add_child(const std::string& name, std::vector<std::unique_ptr<Module>>& keep);
};

class PyModule : public Holder<Module> {};

template <class Base>
Module* Holder<Base>::add_child(const std::string& name, std::vector<std::unique_ptr<Module>>& keep) {
  // child() registers the module under construction with this parent; the prvalue it returns
  // initialises the new object in place (no copy), so the registered address is the object's.
  keep.emplace_back(new PyModule(this->template child<PyModule>(name)));
  return keep.back().get();
}

class PyGraph : public Holder<Graph> {
 public:
  PyGraph(const std::string& name, nb::handle owner) : Holder<Graph>(name), owner_(owner) {}

  void declare_input(const std::string& name, bool optional) { inputs_.push_back(input(name, optional)); }
  void declare_scratchpad(const std::string& name, std::optional<int64_t> d) {
    values_py_.push_back(nb::cast(scratchpad(name, d)));
  }
  void declare_carried(const std::string& name) { values_py_.push_back(nb::cast(carried(name))); }
  Module* child_module(const std::string& name) { return add_child(name, children_); }

  Outputs body() override {
    nb::gil_scoped_acquire gil;
    nb::list ins;
    for (const Input& i : inputs_) ins.append(i ? nb::cast(i.handle()) : nb::none());
    nb::list values;
    for (const nb::object& v : values_py_) values.append(v);
    nb::object r = owner_.attr("_iron_body")(ins, values);
    auto [tensors, carry] =
        nb::cast<std::pair<std::vector<Handle>, std::vector<std::pair<std::string, CarryValue>>>>(r);
    return Outputs(std::move(tensors), iron::carry(std::move(carry)));
  }

  std::vector<std::unique_ptr<Module>> children_;

 private:
  nb::handle owner_;  // the Python iron.Graph, which owns this object
  std::vector<Input> inputs_;
  std::vector<nb::object> values_py_;
};

// ---- calls: numpy in, numpy out ----

struct Call {
  std::vector<Tensor> tensors;
  std::vector<Array> arrays;  // what the tensors view (a contiguous copy of a strided array)
  std::vector<ValueArg> values;
  bool copy = true;
};

/// The tensors are args from `first` on (start() takes its run first).
Call call_args(const nb::args& args, const nb::kwargs& kwargs, bool accept_copy, size_t first = 0) {
  Call c;
  c.tensors.reserve(args.size());
  c.arrays.reserve(args.size());
  for (size_t i = first; i < args.size(); ++i) c.tensors.push_back(tensor_from(args[i], false, &c.arrays));
  for (auto [k, v] : kwargs) {
    const char* name = nb::borrow<nb::str>(k).c_str();
    if (accept_copy && std::strcmp(name, "copy") == 0) {
      c.copy = nb::cast<bool>(v);
      continue;
    }
    if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
      type_error(std::string("per-call value '") + name + "' is an int, not " + nb::type_name(v.type()).c_str());
    c.values.push_back({name, nb::cast<int64_t>(v)});
  }
  return c;
}

/// Output `i` as numpy, cut to what is valid on every axis: past a bound on an inner axis (a
/// walk's per-call length) the device leaves what its memory held, so that is no part of a result.
nb::object output_array(const RunResult& r, size_t i, bool copy, nb::handle owner) {
  const Tensor& t = r.outputs[i];
  const Shape& valid = r.valid[i];
  bool whole = true;
  for (size_t a = 1; a < valid.size(); ++a) whole = whole && valid[a] == t.shape()[a];
  if (whole) return array_from(t, copy, owner);
  nb::list cut;
  for (int64_t n : valid) cut.append(nb::steal(PySlice_New(nullptr, nb::int_(n).ptr(), nullptr)));
  nb::object part = array_from(t, false, owner)[nb::tuple(cut)];
  return copy ? part.attr("copy")() : part;
}

nb::object results(const RunResult& r, bool copy, nb::handle owner) {
  if (r.outputs.size() == 1 && r.carried.empty()) return output_array(r, 0, copy, owner);
  nb::list out;
  for (size_t i = 0; i < r.outputs.size(); ++i) out.append(output_array(r, i, copy, owner));
  if (!r.carried.empty()) {
    nb::dict carried;
    for (const auto& [name, v] : r.carried) carried[nb::str(name.c_str())] = v;
    out.append(nb::module_::import_("iron").attr("Carry")(**carried));
  }
  return nb::tuple(out);
}

/// Holds the GIL released and the device to this thread for the scope.
struct DeviceTurn {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock{device_mutex()};
};

nb::object call_version(nb::handle self, CompiledGraph& v, const nb::args& args, const nb::kwargs& kwargs) {
  Call c = call_args(args, kwargs, true);
  const RunResult* r;
  {
    DeviceTurn turn;
    r = &v(c.tensors, c.values);
  }
  return results(*r, c.copy, self);
}

Shapes shapes_from(const nb::list& given) {
  Shapes s;
  for (nb::handle item : given) {
    auto [name, shape, dtype] = nb::cast<std::tuple<std::string, Shape, DType>>(item);
    s.emplace_back(name, InputSpec(shape, dtype));
  }
  return s;
}

/// The spec's Run: a call of a version started without waiting for it (CompiledGraph.start). It
/// holds what the call reads (the arrays, the version) until the call is waited for, and waits it
/// out when dropped, so no array is freed under a run that reads it.
class PyRun {
 public:
  PyRun() = default;
  PyRun(const PyRun&) = delete;
  PyRun& operator=(const PyRun&) = delete;
  ~PyRun() {
    try {
      settle();
    } catch (const std::exception&) {
      // Its failure belongs to wait(), which nobody called; the run is over either way.
    }
  }

  /// `given`: the arrays `call` views where they were contiguous (call holds the copies made
  /// of the others).
  void start(nb::handle version_object, CompiledGraph& version, Call call, nb::handle given) {
    settle();  // a run started again first finishes its last call, whose arrays it holds
    {
      DeviceTurn turn;
      run_ = version.start(call.tensors, call.values);
    }
    version_ = nb::borrow(version_object);
    given_ = nb::borrow(given);
    call_ = std::move(call);
    pending_ = true;
  }

  /// Waits with the GIL released; the outputs as results() gives them, with this run's carried
  /// values (the version's outputs are its last completed run's).
  nb::object wait(bool copy) {
    if (!version_.is_valid()) value_error("wait() on a run never started (CompiledGraph.start(run, ...))");
    const RunResult* r;
    try {
      DeviceTurn turn;
      r = &run_.wait();
    } catch (...) {
      release_call();
      throw;
    }
    release_call();
    RunResult mine = *r;
    for (auto& [name, value] : mine.carried) value = run_.carried_value(name);
    return results(mine, copy, version_);
  }

  bool done() const { return version_.is_valid() && run_.done(); }

  void cancel() {
    DeviceTurn turn;
    run_.cancel();
  }

 private:
  /// Waits out a started call that nobody waited for, dropping what it held.
  void settle() {
    if (!pending_) return;
    try {
      DeviceTurn turn;
      run_.wait();
    } catch (...) {
      release_call();
      throw;
    }
    release_call();
  }
  void release_call() {
    pending_ = false;
    call_ = Call();
    given_ = nb::object();
  }

  Run run_;
  nb::object version_;  // keeps the version, and through it its graph, alive
  Call call_;           // the tensors the call reads, and the copies made of strided arrays
  nb::object given_;    // the arrays as given
  bool pending_ = false;
};

/// A CarriedLoop's steps as a Python iterator; each step waits with the GIL released.
class PySteps {
 public:
  PySteps(CarriedLoop& loop, int64_t count) : steps_(std::make_unique<CarriedLoop::Steps>(loop, count)) {
    DeviceTurn turn;
    it_ = steps_->begin();
  }
  ~PySteps() { close(); }
  int64_t next() {
    if (!steps_) throw nb::stop_iteration();
    if (!first_) {
      DeviceTurn turn;
      ++*it_;
    }
    first_ = false;
    if (!(*it_ != steps_->end())) {
      close();
      throw nb::stop_iteration();
    }
    return **it_;
  }
  int64_t carried(const std::string& name) const {
    if (!steps_) value_error("the loop's steps are closed");
    return steps_->carried(name);
  }
  void close() {
    if (!steps_) return;
    DeviceTurn turn;
    it_.reset();
    steps_.reset();  // waits out the runs in flight
  }

 private:
  std::unique_ptr<CarriedLoop::Steps> steps_;
  std::optional<CarriedLoop::Steps::iterator> it_;
  bool first_ = true;
};

}  // namespace

void bind_graph(nb::module_& m) {
  m.def("precision_from_name", &precision_from_name);

  nb::class_<Held>(m, "Held", "A param, weight table or state as the C++ module holds it.")
      .def("handle", &Held::handle, "This tensor in the graph being recorded.")
      .def_prop_ro("shape", [](const Held& h) { return nb::tuple(nb::cast(h.shape())); })
      .def_prop_ro("dtype", &Held::dtype)
      .def("array", [](const Held& h) { return array_from(h.tensor(), true); },
           "A copy of the bound tensor of a param or weight.");

  nb::class_<Module>(m, "_Module");
  nb::class_<PyModule, Module>(m, "_PyModule")
      .def("param", &PyModule::add_param)
      .def("param_value", &PyModule::add_param_value)
      .def("weight", &PyModule::add_weight)
      .def("state", &PyModule::add_state)
      .def("tie", &PyModule::add_tie)
      .def("held_paths", [](const PyModule& g) {
        std::vector<std::string> p;
        for (const auto& [path, r] : g.held()) p.push_back(path);
        return p;
      });

  nb::class_<CompiledGraph>(m, "CompiledGraph",
                            "One version of a graph: an image for one input signature.\n\n"
                            "Made by Graph.compile(); the spec's constructor CompiledGraph(recording, plan, "
                            "...) is not bound, nor CompiledGraph.callable (the NPU's loaded image: here the "
                            "version itself is called). load() and upload() take no release callback or "
                            "piece_bytes: the CPU's weights are their checkpoint's mapped memory, never "
                            "copied, and Vulkan uploads each weight whole, once.")
      .def("__call__", [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        return call_version(self, nb::cast<CompiledGraph&>(self), args, kwargs);
      }, "Calls the version with numpy arrays (taken without a copy when contiguous) and per-call "
         "values by name; returns numpy arrays cut to their bounds on every axis (past a walk's per-call "
         "length nothing is defined, so nothing is returned), copies unless copy=False (then "
         "views valid until this version's next call). bf16 outputs are ml_dtypes.bfloat16 arrays "
         "where the ml_dtypes package can be imported, float32 otherwise (numpy has no bfloat16).")
      .def("read", [](nb::handle self, nb::handle x) {
        CompiledGraph& v = nb::cast<CompiledGraph&>(self);
        const Held& held = held_of(x, "read");
        DeviceTurn turn;
        Tensor t = v.read(held);
        nb::gil_scoped_acquire gil;
        return array_from(t, false, self, true);
      }, nb::arg("x"), "A writable numpy view of x's buffer as the device left it: x a state the graph holds "
         "(its attribute, or its iron.Held).")
      .def("push", [](CompiledGraph& v, nb::handle x) {
        const Held& held = held_of(x, "push");
        DeviceTurn turn;
        v.push(held);
      }, nb::arg("x"), "Copies what the host wrote into read(x)'s view to the device.")
      .def("load", [](nb::handle self) {
        CompiledGraph& v = nb::cast<CompiledGraph&>(self);
        {
          DeviceTurn turn;
          v.load();
        }
        return nb::borrow(self);
      }, nb::sig("def load(self) -> CompiledGraph"),
         "Loads the image and uploads its weights now rather than on the first call; returns this "
         "version.")
      .def("upload", [](CompiledGraph& v) {
        DeviceTurn turn;
        v.upload();
      }, "Uploads every weight this version reads that no version of the graph has uploaded yet.")
      .def("release", [](CompiledGraph& v) {
        DeviceTurn turn;
        v.release();
      }, "Frees this version's image and the buffers it holds outside the graph's arena; a later call "
         "loads them again.")
      .def("reads", &CompiledGraph::reads)
      .def("report", &CompiledGraph::report)
      .def("describe", [](const CompiledGraph& v) { return v.describe().str(); })
      .def("emit_to", &CompiledGraph::emit_to)
      .def("start", [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        // run is positional only, as the spec's start(run, /, *tensors, **values): a per-call
        // value may be named run.
        if (args.size() == 0 || !nb::isinstance<PyRun>(args[0]))
          type_error("start(run, /, *tensors, **values): run is an iron.Run");
        PyRun& run = nb::cast<PyRun&>(args[0]);
        run.start(self, nb::cast<CompiledGraph&>(self), call_args(args, kwargs, false, 1),
                  // the arrays alone: holding run itself would be a cycle no collector sees
                  nb::steal(PyTuple_GetSlice(args.ptr(), 1, Py_ssize_t(args.size()))));
      }, nb::sig("def start(self, run: Run, /, *tensors, **values) -> None"),
         "Starts a call of this version on run (an iron.Run) without waiting for it: run.wait() gives its "
         "result. Runs of a graph's versions run in order on the device's own thread while Python goes on; "
         "a call of the graph waits out the runs started before it. The arrays are read when the run runs: "
         "run holds them until it is waited for (leave them unchanged until then). Unlike the spec's, a "
         "version with a host step may be started: its host steps run on the device's thread. ValueError "
         "while a CarriedLoop's steps run on the graph.");

  nb::class_<PyRun>(m, "Run", "A call of a version started without waiting for it (CompiledGraph.start): the spec's run of a full "
                         "ELF, here a task on the graph's run queue, which the device's thread runs in order.")
      .def(nb::init<>())
      .def("wait", &PyRun::wait, nb::arg("copy") = true,
           "Waits (the GIL released) until the call is complete and returns its result as a call's: "
           "numpy arrays cut to their bounds, copies unless copy=False (then views valid until the "
           "version's next run completes), then the Carry of this run's carried values. The outputs are "
           "those the version's last completed run left: wait before starting the version again to read "
           "this run's. Raises what "
           "stopped the run; a run started after a failed one on the same graph fails with its error.")
      .def("done", &PyRun::done, "Whether the call is complete (False for a run never started).")
      .def("cancel", &PyRun::cancel,
           "Drops this call and those started after it on the same graph that the device has not begun: "
           "they complete without running, and their wait() raises ValueError saying so.");

  nb::class_<StateDict>(m, "StateDict", "Named tensors as a checkpoint holds them (quantised kinds included).")
      .def("keys", [](const StateDict& d) {
        std::vector<std::string> k;
        for (const auto& [name, t] : d.items()) k.push_back(name);
        return k;
      })
      .def("__len__", &StateDict::size)
      .def("__contains__", [](const StateDict& d, const std::string& k) { return d.contains(k); })
      .def("__getitem__", [](const StateDict& d, const std::string& k) { return array_from(d.at(k), true); },
           "A copy of one tensor as numpy (quantised kinds dequantised to float32).");

  nb::class_<PyGraph, Module>(m, "_Graph")
      .def(nb::init<const std::string&, nb::handle>())
      .def("input", &PyGraph::declare_input)
      .def("scratchpad", &PyGraph::declare_scratchpad, nb::arg("name"), nb::arg("default").none())
      .def("carried", &PyGraph::declare_carried)
      .def("param", &PyGraph::add_param)
      .def("param_value", &PyGraph::add_param_value)
      .def("weight", &PyGraph::add_weight)
      .def("state", &PyGraph::add_state)
      .def("tie", &PyGraph::add_tie)
      .def("child", &PyGraph::child_module, nb::rv_policy::reference_internal)
      .def("child_of", [](PyGraph& g, Module* parent, const std::string& name) {
        return static_cast<PyModule*>(parent)->add_child(name, g.children_);
      }, nb::rv_policy::reference_internal)
      .def("held_paths", [](const PyGraph& g) {
        std::vector<std::string> p;
        for (const auto& [path, r] : g.held()) p.push_back(path);
        return p;
      })
      .def_prop_ro("name", &PyGraph::name)
      .def("load_state_dict", [](PyGraph& g, const nb::list& items, const std::string& path) {
        std::vector<std::pair<std::string, Tensor>> t;
        for (nb::handle item : items) {
          auto pair = nb::borrow<nb::tuple>(item);
          t.emplace_back(nb::cast<std::string>(pair[0]), tensor_from(pair[1], true));
        }
        DeviceTurn turn;
        g.load_state_dict(t, path);
      })
      .def("load_tensors", [](PyGraph& g, const StateDict& sd, const std::string& path) {
        DeviceTurn turn;
        g.load_state_dict(sd.items(), path);
      })
      .def("load_checkpoint", [](PyGraph& g, const std::string& file, const std::string& path) {
        DeviceTurn turn;
        StateDict sd = open_checkpoint(file);
        g.load_state_dict(sd.items(), path);
      })
      .def("compile", [](PyGraph& g, const nb::list& shapes, bool check, int threads, const std::string& device,
                         CompiledGraph* feeds) {
        CompileOptions o;
        o.check = check;
        o.threads = threads;
        o.device = device;
        o.feeds = feeds;
        Shapes s = shapes_from(shapes);
        // Recording calls back into Python (body() takes the GIL); the device is this thread's
        // meanwhile, so no call of another thread runs while versions are added.
        DeviceTurn turn;
        return &g.compile(s, o);
      }, nb::arg("shapes"), nb::arg("check"), nb::arg("threads"), nb::arg("device"), nb::arg("feeds").none(),
         nb::rv_policy::reference_internal)
      .def("reference", [](PyGraph& g, nb::args args, nb::kwargs kwargs) {
        Call c = call_args(args, kwargs, false);
        RunResult r;
        {
          DeviceTurn turn;
          r = g.reference(c.tensors, c.values);
        }
        return results(r, true, nb::handle());
      })
      .def("set_profile", [](PyGraph& g, const Profile& p) { g.set_profile(p); })
      .def("set_profile_path", [](PyGraph& g, const std::string& p) { g.set_profile(p); })
      .def_prop_ro("versions", &PyGraph::versions)
      .def("stats", [](const PyGraph& g) {
        const GraphStats st = g.stats();
        nb::dict uploads;
        for (const auto& [path, n] : st.uploads) uploads[nb::str(path.c_str())] = n;
        nb::dict d;
        d["versions"] = st.versions;
        d["scratch_bytes"] = st.scratch_bytes;
        d["state_bytes"] = st.state_bytes;
        d["output_bytes"] = st.output_bytes;
        d["uploads"] = uploads;
        d["text"] = st.str();
        return d;
      })
      .def("release", [](PyGraph& g) {
        DeviceTurn turn;
        g.release();
      });

  nb::class_<Profile>(m, "Profile",
                      "Tunable values by operator and dimensions.\n\n"
                      "Of the spec's Profile, Profile.make, Profile.dims and Profile.matches are not bound: "
                      "they build and match Python operator objects, and an operator here is a C++ step a "
                      "graph records, never a Python object. tunables_for() gives what make() would fill "
                      "in; an operator is named by its class's name or a str.")
      .def(nb::init<>())
      .def("add", [](Profile& p, nb::handle cls, const nb::kwargs& fields) {
        p.add(operator_name(cls), fields_from(nb::borrow<nb::dict>(fields)));
      }, nb::arg("cls"), nb::arg("fields"),
         "Adds an entry for the operator cls (its class, or its name): its params to match (one left out "
         "matches any) and the tunables to give. TypeError for an unknown field or an entry that gives no "
         "tunable.")
      .def("tunables_for", [](const Profile& p, nb::handle cls, nb::handle given, const nb::kwargs& more) {
        // The spec's tunables_for(cls, given: Mapping); keywords serve as well.
        nb::dict fields;
        if (!given.is_none()) {
          if (!PyMapping_Check(given.ptr()))
            throw nb::type_error("tunables_for(cls, given): given is a mapping of the step's params");
          fields = nb::borrow<nb::dict>(nb::module_::import_("builtins").attr("dict")(given));
        }
        for (auto [k, v] : more) fields[k] = v;
        std::shared_ptr<Operator> made = p.make(operator_name(cls), fields_from(fields));
        nb::dict out;
        for (const auto& [k, v] : made->tunables().items())
          std::visit([&](const auto& x) { out[nb::str(k.c_str())] = x; }, v);
        return out;
      }, nb::arg("cls"), nb::arg("given") = nb::none(), nb::arg("more"),
         "The tunables a step of the operator cls (its class, or its name) made with the params in given "
         "gets, each from the most specific entry; ValueError where equally specific entries disagree.")
      // path a str or an os.PathLike (pathlib.Path), as the spec's str | Path.
      .def("save", [](const Profile& p, const std::filesystem::path& path) { p.save(path.string()); },
           nb::arg("path"), "Writes {\"entries\": [...]}, one entry a line; path a str or a pathlib.Path.")
      .def_static("load", [](const std::filesystem::path& path) { return Profile::load(path.string()); },
                  nb::arg("path"), "Reads what save() wrote; names the file and the entry in every error.")
      .def_static("parse", &Profile::parse, nb::arg("text"), nb::arg("name") = "profile",
                  "Parses the text of a profile file; name stands for the file in error messages.")
      .def_prop_ro("empty", &Profile::empty)
      .def("__len__", [](const Profile& p) { return p.entries().size(); });

  nb::class_<CarriedLoop>(m, "_CarriedLoop")
      .def(nb::init<CompiledGraph&, CompiledGraph&, int>(), nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("start", [](CarriedLoop& l, nb::args args, nb::kwargs kwargs) {
        Call c = call_args(args, kwargs, false);
        const RunResult* r;
        {
          DeviceTurn turn;
          r = &l.start(c.tensors, c.values);
        }
        return results(*r, true, nb::handle());
      }, "Runs first and waits for it; returns its result (copies).")
      .def("steps", [](CarriedLoop& l, int64_t n) { return new PySteps(l, n); }, nb::keep_alive<0, 1>())
      .def_prop_ro("depth", &CarriedLoop::depth);
  nb::class_<PySteps>(m, "_Steps")
      .def("__iter__", [](nb::handle s) { return s; })
      .def("__next__", &PySteps::next)
      .def("carried", &PySteps::carried, nb::arg("name"),
           "What carried value `name` became in the step last yielded.")
      .def("close", &PySteps::close);

  // For bench/python_call_overhead.py: `n` calls of a version from C++ on the same arrays, timed
  // there, so the Python side's cost is measured beside the C++ side's in one run.
  m.def("_time_calls", [](CompiledGraph& v, int64_t n, nb::args args, nb::kwargs kwargs) {
    Call c = call_args(args, kwargs, false);
    DeviceTurn turn;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) v(c.tensors, c.values);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });

  // A child graph's call and inline() record under the child's own profile (iron.Graph's
  // __call__ and inline run the body in Python, so the C++ Graph::operator() never sees them).
  m.def("_record_under", [](const Profile& profile, const std::string& what, nb::callable fn) {
    ProfileScope scope(profile, what);
    return fn();
  }, nb::arg("profile"), nb::arg("what"), nb::arg("fn"));
  m.def("_profile_for_device", [](const std::string& path, const std::string& device) {
    return Profile::load_for_device(path, device);
  }, nb::arg("path"), nb::arg("device"));

  m.def("on_host", [](nb::object fn, const std::vector<Handle>& reads, const std::vector<Handle>& writes) {
    size_t n_reads = reads.size();
    on_host([fn, n_reads](std::span<Tensor> views) {
      nb::gil_scoped_acquire gil;
      nb::list arrays;
      for (size_t i = 0; i < views.size(); ++i) {
        // The views are valid only during the callback: a writable view for writes, read-only
        // for reads; a callback that keeps one gets memory the next step may overwrite.
        arrays.append(array_from(views[i], false, nb::none(), i >= n_reads));
      }
      fn(*nb::tuple(arrays));
    }, reads, writes);
  }, nb::arg("fn"), nb::arg("reads"), nb::arg("writes"));
}

}  // namespace iron::python
