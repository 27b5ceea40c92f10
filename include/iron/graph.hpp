// Graphs: a class whose body() is recorded on handles once per input signature and compiled to
// one image per signature; the image is called with tensors and per-call values.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "iron/handle.hpp"
#include "iron/module.hpp"
#include "iron/operator.hpp"
#include "iron/precision.hpp"
#include "iron/profile.hpp"
#include "iron/tensor.hpp"
#include "iron/value.hpp"

namespace iron {

struct Recording;
class Arena;
class CompiledGraph;
namespace detail {
class Image;
class RunQueue;
class StepChain;
}

/// A named graph input; undefined (false) when an optional input is absent this signature.
class Input {
 public:
  Input() = default;
  operator const Handle&() const { return *slot_; }  // NOLINT: used wherever a handle is
  const Handle& handle() const { return *slot_; }
  explicit operator bool() const { return slot_ && slot_->defined(); }
  const Handle* operator->() const { return slot_.get(); }
  Handle operator[](const Index& i) const { return (*slot_)[i]; }
  Handle operator[](std::initializer_list<Index> i) const { return (*slot_)[i]; }
  Handle operator[](const Handle& ids) const { return (*slot_)[ids]; }
  const Shape& shape() const { return slot_->shape(); }

 private:
  friend class Graph;
  std::shared_ptr<Handle> slot_;
};

/// The next value of a carried value: an expression of per-call values or a one-element handle.
using CarryValue = std::variant<Affine, Handle>;
struct Carry {
  std::vector<std::pair<std::string, CarryValue>> items;
};
/// Returned with a body's outputs: the next value of each carried value,
/// `iron::carry({{"token", next}, {"position", position + 1}})`.
Carry carry(std::vector<std::pair<std::string, CarryValue>> next_values);

/// Runs `fn` on the host between the steps around it, with host views of `reads` (cut to their
/// bounds) then `writes` (parts of states). A graph with one has no device loop.
void on_host(std::function<void(std::span<Tensor>)> fn, std::vector<Handle> reads,
             std::vector<Handle> writes = {});

/// What body() returns: its output handles, and the carried values' next values.
struct Outputs {
  std::vector<Handle> tensors;
  Carry carried;
  Outputs(std::initializer_list<Handle> t) : tensors(t) {}  // NOLINT
  Outputs(std::vector<Handle> t, Carry c = {}) : tensors(std::move(t)), carried(std::move(c)) {}
};

/// An input's shape and dtype for compile().
struct InputSpec {
  Shape shape;
  DType dtype = f32;
  InputSpec(Shape s, DType d = f32) : shape(std::move(s)), dtype(d) {}  // NOLINT
  InputSpec(std::initializer_list<int64_t> s, DType d = f32) : shape(s), dtype(d) {}  // NOLINT
};
using Shapes = std::vector<std::pair<std::string, InputSpec>>;

/// What a call (or reference()) returns: the outputs, and the next value of each carried value
/// (the spec's Carry), in carry order.
struct RunResult {
  std::vector<Tensor> outputs;
  /// Each output's entries valid this call on every axis (its shape where an axis has no bound).
  /// Outputs are cut to the first; past another (a walk's per-call `length`, a bound on an inner
  /// axis) an output holds nothing defined: the device writes only the valid entries and leaves
  /// the rest as its memory was, the reference leaves zeros. Python's results are cut to all.
  std::vector<Shape> valid;
  std::vector<std::pair<std::string, int64_t>> carried;
  int64_t carried_value(std::string_view name) const;
  const Tensor& operator[](size_t i) const { return outputs.at(i); }
  size_t size() const { return outputs.size(); }
  operator std::vector<Tensor>() const { return outputs; }  // NOLINT: outputs are what most want
};

/// One step of a compiled version as the planner left it: its operator, params, the tunables
/// the profile chose (else the operator's defaults), and its operands' shapes.
struct StepView {
  std::string op;
  Fields params;
  Fields tunables;
  std::vector<Shape> inputs, outputs;
  Precision precision = Precision::highest;
};

/// What a compiled version is, read-only.
struct VersionView {
  std::string signature;  // the inputs' shapes and dtypes it was compiled for
  std::vector<StepView> steps;
  int64_t scratch_bytes = 0;  // the scratch this version needs (the arena holds the largest)
  int64_t output_bytes = 0;   // memory of its own outputs, kept apart from the scratch
  int words = 0;              // per-call words: the values, then each derived expression
  std::vector<std::string> reads;  // the per-call values it reads
  /// A line for the version, then one per step.
  std::string str() const;
};

/// What a graph holds, read-only.
struct GraphStats {
  size_t versions = 0;
  int64_t scratch_bytes = 0;  // the arena's scratch, shared by every version
  int64_t state_bytes = 0;
  int64_t output_bytes = 0;   // every version's outputs
  /// Each weight uploaded, by path, with how often (once, unless release() freed it since).
  std::vector<std::pair<std::string, int64_t>> uploads;
  std::string str() const;
};

/// A version's runs as the device's own clock saw them: on Vulkan, timestamps written before and
/// after each run's commands (full runs only: not check mode's or host steps' single commands).
/// `runs` is 0 where the device keeps no such clock (the CPU; a GPU whose compute queue writes no
/// timestamps).
struct DeviceTime {
  int64_t runs = 0;
  double seconds = 0;      // summed over the runs
  int64_t dispatches = 0;  // of one run
};

/// A per-call value given to a call: `{"position", 5}`.
struct ValueArg {
  std::string_view name;
  int64_t value;
};

struct CompileOptions {
  /// Run each step on its own and compare it with its reference, failing at the first step
  /// outside its tolerance.
  bool check = false;
  /// Threads the CPU device uses (0: the machine's cores).
  int threads = 0;
  /// The device: "cpu" or "vulkan" (the GPU IRON_VULKAN_DEVICE names, else a discrete GPU, else
  /// an integrated one, else any other, such as Mesa's lavapipe). Empty: the device the graph's
  /// versions use already (a graph's memory is on one device at a time), else the CPU.
  std::string device;
  /// The version this one's Emit starts: after each run its carried values (and the per-call
  /// values the run was given) become that version's values, as emit_to(). By default itself.
  CompiledGraph* feeds = nullptr;
};

/// A started call of a version (CompiledGraph::start): the host goes on while it runs.
class Run {
 public:
  Run() = default;
  /// Waits until the run is complete and returns its version's result (outputs valid until that
  /// version's next run completes); rethrows what stopped it. A run queued after a failed one
  /// fails with the same error.
  const RunResult& wait();
  bool done() const;
  /// Drops this run and the runs started after it on the same call, those the device has not
  /// begun (a run in progress finishes): they complete without running, and their wait() throws
  /// a value error saying so. What a loop left early uses, so the steps it no longer wants cost
  /// nothing.
  void cancel();
  /// What carried value `name` became in this run (after wait(); until 64 more runs start).
  int64_t carried_value(std::string_view name) const;

 private:
  friend class CompiledGraph;
  CompiledGraph* version_ = nullptr;
  std::shared_ptr<detail::RunQueue> queue_;
  int64_t ticket_ = -1;
};

/// While it lives, the steps recorded on this thread take their tunables from `profile` (an empty
/// profile leaves the one in force), then the one before it again: how a graph called in another's
/// body, and inline_(), record under their own profile; a binding recording a graph's body its own
/// way uses it the same. `profile` outlives the scope. A type error naming `what` when no body is
/// being recorded.
class ProfileScope {
 public:
  ProfileScope(const Profile& profile, const std::string& what);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  void* recorder_;
  const Profile* previous_;
};

class Graph : public Module {
 public:
  explicit Graph(std::string name = "");
  ~Graph() override;

  virtual Outputs body() = 0;
  const std::string& name() const { return name_; }

  /// Binds every param held, at any depth, to its tensor at `path` + its dotted path in `tensors`,
  /// cast as torch's copy_; a param held at several paths binds once. One error names every
  /// missing, extra, wrong-shape and wrong-kind path.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::string& path = "");
  template <class Tree>
  void load_state_dict(const Tree& tree, const std::string& path = "") {
    load_state_dict(tree.items(), path);
  }

  /// The tunables this graph's steps take: a profile, or a file / directory of <device>.json.
  void set_profile(Profile profile);
  void set_profile(const std::string& path);
  const Profile& profile() const { return profile_; }

  /// Records body() on handles of these shapes, then lets the planner fold and merge steps
  /// (src/graph/fold.hpp). `checking`: for a check-mode version, which compares every step
  /// with its operator's reference: a SwiGLU then stays a step of its own.
  std::shared_ptr<Recording> record(const Shapes& shapes, bool checking = false);
  /// The version for these input shapes, compiled on first use and cached; calling with a new
  /// shape compiles a new version (and logs that it did). Compiling plans the version and
  /// reserves the arena's scratch; lowering it to the device's program, which uploads the
  /// weights it reads, waits for its first call or load().
  CompiledGraph& compile(const Shapes& shapes, CompileOptions options = {});
  /// The version a call with these tensors uses (compiling it if needed).
  CompiledGraph& version_for(std::span<const Tensor> tensors);
  size_t versions() const { return versions_.size(); }
  /// The versions compiled, the arena's bytes and each weight's uploads.
  GraphStats stats() const;

  /// Runs body() on the host, each step through its operator's reference(), and host steps
  /// (on_host) on the host; no compile needed. Outputs are f32, each rounded once to its dtype;
  /// `carried` holds the carried values' next values, so a loop can be stepped by hand. States
  /// persist from one reference() call to the next, as on the device.
  RunResult reference(std::span<const Tensor> tensors, std::span<const ValueArg> values = {});
  RunResult reference(std::initializer_list<Tensor> tensors,
                                std::initializer_list<ValueArg> values = {}) {
    return reference(std::span<const Tensor>(tensors.begin(), tensors.size()),
                     std::span<const ValueArg>(values.begin(), values.size()));
  }

  /// Called inside another graph's body: records this graph's body there, on `inputs` (in the
  /// order declared; an optional one may be an undefined handle or left off the end) and with
  /// its per-call values standing for the caller's expressions given by name (a value left out
  /// takes its default; one with none may not be read), under this graph's profile. Returns
  /// the body's outputs and its carried values' next values, for the caller to use or carry.
  Outputs operator()(std::vector<Handle> inputs, std::vector<std::pair<std::string, Affine>> values = {});

  /// Records `fn` (one of this graph's methods) into the graph being recorded, under this graph's
  /// profile.
  template <class Fn>
  auto inline_(Fn&& fn) -> decltype(fn()) {
    auto restore = enter_inline();
    return fn();
  }

  /// Frees the memory every version and the arena hold; a later call loads them again.
  void release();
  /// The arena every version shares (scratch, states, weight uploads).
  Arena& arena();
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<PerCall>& value_decls() const { return values_; }

 protected:
  Input input(const std::string& name, bool optional = false);
  /// A per-call value the host writes each call; one with a default may be left out.
  Scratchpad scratchpad(const std::string& name, std::optional<int64_t> default_value = {});
  /// A per-call value the body computes for the next call (returned with iron::carry).
  Carried carried(const std::string& name);

 private:
  friend class CompiledGraph;
  ProfileScope enter_inline();
  std::string signature(const Shapes& shapes) const;

  std::string name_;
  std::vector<std::string> input_names_;
  std::vector<bool> input_optional_;
  std::vector<std::shared_ptr<Handle>> input_slots_;
  std::vector<PerCall> values_;
  std::vector<std::optional<int64_t>> value_defaults_;
  Profile profile_;
  bool bound_ = false;
  std::unique_ptr<Arena> arena_;
  std::map<std::string, std::unique_ptr<CompiledGraph>> versions_;
  std::map<std::string, std::shared_ptr<Recording>> references_;
  std::shared_ptr<void> reference_states_;  // host copies of states for reference()
  // Started runs, in order; made on the first start(). Last, so it is destroyed (waiting out
  // the runs in flight) before the versions and the arena they use.
  std::shared_ptr<detail::RunQueue> queue_;
  const std::shared_ptr<detail::RunQueue>& queue();
  // A CarriedLoop's steps chained on the device while its Steps range lives (else null).
  detail::StepChain* chain_ = nullptr;
  // A version's read(x) copies of states and weights where the host does not map the device's
  // memory: what push(x) of any version writes back.
  std::map<const Resident*, Tensor> pushed_copies_;
  friend class CarriedLoop;
  /// Waits out every started run (a call on the host's thread must not overlap one); refused
  /// while a CarriedLoop's steps are chained on the device.
  void settle();
};

/// One version of a graph: an image for one input signature, callable many times.
class CompiledGraph {
 public:
  /// Outputs are views of this version's own memory, valid until its next call (a call of
  /// another version leaves them as they are).
  using Result = RunResult;

  CompiledGraph(Graph& graph, std::shared_ptr<Recording> recording, CompileOptions options);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  /// Stages the inputs, writes the words, runs the image; no allocation on this path. Waits out
  /// any run started before it.
  const Result& operator()(std::span<const Tensor> tensors, std::span<const ValueArg> values = {});
  const Result& operator()(std::initializer_list<Tensor> tensors,
                           std::initializer_list<ValueArg> values = {}) {
    return (*this)(std::span<const Tensor>(tensors.begin(), tensors.size()),
                   std::span<const ValueArg>(values.begin(), values.size()));
  }

  /// Starts a call without waiting for it: runs of a graph's versions run in order on the
  /// device while the host goes on; `tensors` must stay valid until the run is waited for.
  /// Host steps of a started run run on the device's thread.
  Run start(std::span<const Tensor> tensors, std::span<const ValueArg> values = {});
  Run start(std::initializer_list<Tensor> tensors = {}, std::initializer_list<ValueArg> values = {}) {
    return start(std::span<const Tensor>(tensors.begin(), tensors.size()),
                 std::span<const ValueArg>(values.begin(), values.size()));
  }
  /// Programs this version's Emit to feed `target` (a version of the same graph): after each run,
  /// the carried values' next values and the per-call values the run was given become target's,
  /// so that target's next run needs no value from the host. Without it, a version feeds itself.
  void emit_to(CompiledGraph& target);

  /// `x`'s buffer as the device left it: a host view (a state, an output, a scratch buffer).
  Tensor read(const Held& x);
  Tensor read(const Handle& x);
  /// Sends back to the device what the host wrote into read(x)'s view: a no-op where that
  /// view is the device's memory (the CPU, a unified-memory GPU); elsewhere it writes the copy
  /// the last read(x) returned, once the runs in flight are done.
  void push(const Held& x);
  /// Loads the image and uploads its weights now rather than on the first call.
  CompiledGraph& load();
  /// Uploads every weight this version reads that no version has uploaded yet.
  void upload();
  /// Frees this version's image and the buffers it holds outside the arena.
  void release();

  const Recording& recording() const { return *recording_; }
  Graph& graph() { return *graph_; }
  /// The per-call values this version reads, by name.
  std::vector<std::string> reads() const;
  /// A description of the plan: steps, buffers, arena bytes, words.
  std::string report() const;
  /// Each step with its operator, shapes and chosen tunables; the bytes and words it needs.
  VersionView describe() const;
  /// The device's time over this version's runs so far (read it between runs: after a call
  /// returns or a started run is waited for).
  DeviceTime device_time() const;

  // For CarriedLoop and the devices.
  detail::Image& image();
  bool has_carry() const;

 private:
  friend class CarriedLoop;
  friend class Graph;
  friend class detail::RunQueue;
  friend class Run;
  /// One call on this thread: stage, write the words, run, fill the result, emit.
  const Result& run_now(std::span<const Tensor> tensors, std::span<const ValueArg> values);
  Graph* graph_;
  std::string signature_;
  CompiledGraph* feeds_ = this;
  std::shared_ptr<Recording> recording_;
  CompileOptions options_;
  std::unique_ptr<detail::Image> image_;
  Result result_;
};

}  // namespace iron
