// What recording a graph's body() produces: buffers, steps, per-call values, bounds to check and
// the carried values. Device-independent; the planner and the devices read it.
#pragma once

#include <functional>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "iron/handle.hpp"
#include "iron/operator.hpp"
#include "iron/precision.hpp"
#include "iron/tensor.hpp"
#include "iron/value.hpp"
#include "graph/prepared.hpp"

namespace iron {

class Profile;

enum class Role : uint8_t {
  input,    // staged by the host each call
  scratch,  // lives in the arena for part of a run
  weight,   // resident: a param or a weight table, uploaded once per graph
  state,    // resident: device state shared by every version (a KV cache)
};

/// A resident's storage, shared by every version of a graph: a param's bound tensor, a weight
/// table, or a state. Identity (the pointer) is what makes two handles the same resident.
struct Resident {
  std::string path;
  Shape shape;
  DType dtype = f32;
  bool is_state = false;
  Tensor tensor;  // weights: the bound data; states: allocated by the arena
  // Weights: what kernels made of `tensor` (bind() drops them with the data they came from).
  std::shared_ptr<PreparedForms> prepared = std::make_shared<PreparedForms>();
  void bind(Tensor t) {
    tensor = std::move(t);
    prepared = std::make_shared<PreparedForms>();
  }
};

struct BufferNode {
  int id = -1;
  std::string name;
  Role role = Role::scratch;
  Shape shape;
  DType dtype = f32;
  std::shared_ptr<Resident> resident;  // weights and states
};

struct Step {
  std::shared_ptr<Operator> op;
  std::vector<Handle> in;
  std::vector<Handle> out;
  std::vector<Affine> scalars;
  Precision precision = Precision::highest;
};

/// A host function between two device steps.
struct HostStep {
  size_t after_step;  // runs once steps [0, after_step) are done
  std::function<void(std::span<Tensor>)> fn;
  std::vector<Handle> reads, writes;
};

/// A per-call value must satisfy lo <= value < hi this call.
struct Constraint {
  Affine value;
  int64_t lo, hi;
  std::string what;
};

/// An i32 graph input whose values must each lie in [0, rows) every call, checked on the host
/// before a run as a gather's ids are: the per-row cache slots and positions of a batched
/// decode, which index a state without any table to gather from.
struct IdLimit {
  Handle ids;
  int64_t rows;
  std::string what;  // what the values index, for the error
};

struct CarryItem {
  PerCall target;
  std::variant<Affine, Handle> next;
};

struct Recording {
  std::string graph;
  std::vector<std::shared_ptr<BufferNode>> buffers;
  std::vector<std::string> input_names;
  std::vector<Handle> inputs;  // one per declared input; undefined where an optional is absent
  std::vector<Handle> outputs;
  std::vector<Step> steps;
  std::vector<HostStep> host;
  std::vector<PerCall> values;  // every per-call value the graph declares
  std::vector<Constraint> constraints;
  std::vector<IdLimit> id_limits;
  std::vector<CarryItem> carry;
  /// The Emit step's output: each carried value's next value, in carry order (undefined
  /// without carried values).
  Handle emitted;
};

/// The recording in progress on this thread, if any.
class Recorder {
 public:
  Recorder(std::string graph, const Profile* profile);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  static Recorder* current();
  /// The recorder, or a type error naming `what` when no body is being recorded.
  static Recorder& require(const std::string& what);

  Recording& recording() { return recording_; }
  const Profile* profile() const { return profile_; }
  void set_profile(const Profile* p) { profile_ = p; }

  Handle new_buffer(const std::string& name, Role role, const Shape& shape, DType dtype,
                    std::shared_ptr<Resident> resident = nullptr);
  Handle scratch(const std::string& hint, const Shape& shape, DType dtype);
  /// The handle of a resident (one buffer per resident per recording).
  Handle resident(const std::shared_ptr<Resident>& r);

  /// Builds an operator of `name` with its open tunables from the profile, and records it.
  std::shared_ptr<Operator> make(const std::string& name, Fields params, Fields given_tunables = {});
  void add_step(Step step);
  /// `value` must lie in [lo, hi) each call.
  void limit(const Affine& value, int64_t lo, int64_t hi, const std::string& what);
  /// Each value of `ids`, when it is a graph input, must lie in [0, rows) each call (a value
  /// the device makes is in range by construction, as a sampled token is).
  void limit_ids(const Handle& ids, int64_t rows, const std::string& what);

  /// While a graph called inside this body records, what its per-call values stand for: by
  /// slot, the caller's expression, or none (then using it is an error naming it).
  struct CalledGraph {
    const void* owner;
    std::string graph;
    std::vector<std::optional<Affine>> values;
  };
  void enter_call(CalledGraph call) { calls_.push_back(std::move(call)); }
  void leave_call() { calls_.pop_back(); }
  /// The expression `value` stands for in the graph being called, if it belongs to one.
  const Affine* given(const PerCall& value) const;

 private:
  std::string graph_;
  const Profile* profile_;
  Recorder* previous_;
  Recording recording_;
  std::vector<std::pair<Resident*, Handle>> residents_;
  std::vector<CalledGraph> calls_;
  int scratch_count_ = 0;
};

/// The slot of per-call value `name` among `values`, or a type error naming what `graph` takes.
int value_slot(const std::vector<PerCall>& values, std::string_view name, const std::string& graph);
/// A value error unless `value`, given for `name`, fits a per-call word (30 bits).
void check_value(std::string_view name, int64_t value, const std::string& graph);

/// Gives `h` a dense layout, recording a copy if it is a strided or gathered view.
Handle dense(const Handle& h);

}  // namespace iron
