#include "graph/recording.hpp"

#include "iron/error.hpp"
#include "iron/profile.hpp"

namespace iron {

namespace {
thread_local Recorder* current_recorder = nullptr;
}

Recorder::Recorder(std::string graph, const Profile* profile)
    : graph_(std::move(graph)), profile_(profile), previous_(current_recorder) {
  recording_.graph = graph_;
  current_recorder = this;
}

Recorder::~Recorder() { current_recorder = previous_; }

Recorder* Recorder::current() { return current_recorder; }

int value_slot(const std::vector<PerCall>& values, std::string_view name, const std::string& graph) {
  for (const PerCall& v : values)
    if (v.name == name) return v.slot;
  std::string known;
  for (const PerCall& v : values) known += (known.empty() ? "" : ", ") + v.name;
  type_error(graph + ": no per-call value '" + std::string(name) + "' (it takes: " + (known.empty() ? "none" : known) + ")");
}

void check_value(std::string_view name, int64_t value, const std::string& graph) {
  if (value < 0 || value >= kValueLimit)
    value_error(graph + ": per-call value " + std::string(name) + "=" + std::to_string(value) +
                " is outside 30 bits [0, 2^30)");
}

const Affine* Recorder::given(const PerCall& value) const {
  for (auto call = calls_.rbegin(); call != calls_.rend(); ++call) {
    if (call->owner != value.owner) continue;
    const auto& v = call->values.at(size_t(value.slot));
    if (!v)
      type_error(call->graph + ": per-call value '" + value.name +
                 "' is read, but the body that called this graph gave none (and it has no default)");
    return &*v;
  }
  return nullptr;
}

Recorder& Recorder::require(const std::string& what) {
  if (!current_recorder) type_error(what + " records into a graph's body()");
  return *current_recorder;
}

Handle Recorder::new_buffer(const std::string& name, Role role, const Shape& shape, DType dtype,
                            std::shared_ptr<Resident> resident) {
  auto node = std::make_shared<BufferNode>();
  node->id = int(recording_.buffers.size());
  node->name = name;
  node->role = role;
  node->shape = shape;
  node->dtype = dtype;
  node->resident = std::move(resident);
  element_count(shape);  // refuses negative dimensions
  recording_.buffers.push_back(node);
  return Handle::whole(node);
}

Handle Recorder::scratch(const std::string& hint, const Shape& shape, DType dtype) {
  return new_buffer(hint + "#" + std::to_string(scratch_count_++), Role::scratch, shape, dtype);
}

Handle Recorder::resident(const std::shared_ptr<Resident>& r) {
  for (const auto& [key, handle] : residents_)
    if (key == r.get()) return handle;
  Handle h = new_buffer(r->path, r->is_state ? Role::state : Role::weight, r->shape, r->dtype, r);
  residents_.emplace_back(r.get(), h);
  return h;
}

std::shared_ptr<Operator> Recorder::make(const std::string& name, Fields params,
                                         Fields given_tunables) {
  for (const auto& [k, v] : given_tunables.items()) params.set(k, v);
  if (profile_) return profile_->make(name, params);
  const CatalogEntry& entry = catalog_entry(name);
  Fields tunables;
  Fields only_params;
  for (const auto& [k, v] : params.items()) {
    if (entry.declaration->tunable(k))
      tunables.set(k, v);
    else
      only_params.set(k, v);
  }
  return entry.make(std::move(only_params), std::move(tunables));
}

void Recorder::add_step(Step step) {
  for (const Handle& h : step.in)
    if (!h.defined()) value_error(step.op->name() + ": an input handle is undefined");
  for (const Handle& h : step.out)
    if (h.buffer()->role == Role::weight || h.buffer()->role == Role::input)
      value_error(step.op->name() + " cannot write " + h.str() + ": inputs and weights are read-only");
  recording_.steps.push_back(std::move(step));
}

void Recorder::limit(const Affine& value, int64_t lo, int64_t hi, const std::string& what) {
  if (value.is_constant()) {
    int64_t v = value.constant();
    if (v < lo || v >= hi) index_error(what + ": " + std::to_string(v) + " is outside [" +
                                       std::to_string(lo) + ", " + std::to_string(hi) + ")");
    return;
  }
  recording_.constraints.push_back({value, lo, hi, what});
}

void Recorder::limit_ids(const Handle& ids, int64_t rows, const std::string& what) {
  if (ids.dtype() != i32 || ids.rank() != 1) type_error(what + ": ids are a 1-D i32 handle, not " + ids.str());
  if (ids.buffer()->role == Role::input) recording_.id_limits.push_back({ids, rows, what});
}

Handle dense(const Handle& h) {
  if (h.layout() == Layout::dense) return h;
  Recorder& r = Recorder::require("copying a view");
  Handle out = r.scratch(h.name() + ".view", h.shape(), h.dtype()).with_bounds(h.bounds());
  out.assign(h);
  return out;
}

}  // namespace iron
