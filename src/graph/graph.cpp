#include "iron/graph.hpp"

#include <algorithm>
#include <sstream>

#include "graph/arena.hpp"
#include "graph/image.hpp"
#include "graph/fold.hpp"
#include "graph/recording.hpp"
#include "graph/run_queue.hpp"
#include "graph/reference.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron {

Carry carry(std::vector<std::pair<std::string, CarryValue>> next_values) {
  return Carry{std::move(next_values)};
}

void on_host(std::function<void(std::span<Tensor>)> fn, std::vector<Handle> reads, std::vector<Handle> writes) {
  Recorder& r = Recorder::require("on_host");
  for (Handle& h : reads) h = dense(h);
  for (const Handle& h : writes) {
    if (h.layout() != Layout::dense) value_error("on_host writes contiguous views, not " + h.str());
    if (h.buffer()->role != Role::state) value_error("on_host writes parts of states, not " + h.str());
  }
  r.recording().host.push_back({r.recording().steps.size(), std::move(fn), std::move(reads), std::move(writes)});
}

Graph::Graph(std::string name) : name_(name.empty() ? "graph" : std::move(name)), arena_(std::make_unique<Arena>(detail::cpu_device())) {}
Graph::~Graph() {
  if (queue_) queue_->drain();
}

Input Graph::input(const std::string& name, bool optional) {
  for (const auto& n : input_names_)
    if (n == name) value_error(name_ + ": input '" + name + "' is declared twice");
  Input in;
  in.slot_ = std::make_shared<Handle>();
  input_names_.push_back(name);
  input_optional_.push_back(optional);
  input_slots_.push_back(in.slot_);
  return in;
}

Scratchpad Graph::scratchpad(const std::string& name, std::optional<int64_t> default_value) {
  for (const auto& v : values_)
    if (v.name == name) value_error(name_ + ": per-call value '" + name + "' is declared twice");
  if (default_value && (*default_value < 0 || *default_value >= kValueLimit))
    value_error(name_ + ": default of '" + name + "' is outside 30 bits");
  Scratchpad s;
  s.name = name;
  s.slot = int(values_.size());
  s.kind = ValueKind::scratchpad;
  s.owner = this;
  values_.push_back(s);
  value_defaults_.push_back(default_value);
  return s;
}

Carried Graph::carried(const std::string& name) {
  Scratchpad s = scratchpad(name);
  values_.back().kind = ValueKind::carried;
  Carried c;
  c.name = s.name;
  c.slot = s.slot;
  c.kind = ValueKind::carried;
  c.owner = this;
  return c;
}

void Graph::set_profile(Profile profile) { profile_ = std::move(profile); }
void Graph::set_profile(const std::string& path) { profile_ = Profile::load_for_device(path, "cpu"); }

Arena& Graph::arena() { return *arena_; }

// ---- load_state_dict ------------------------------------------------------------------------

namespace {
bool float_kind(DType t) { return info(t).floating; }

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}
}  // namespace

void Graph::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::string& path) {
  if (!path.empty() && path.back() != '.')
    value_error(name_ + ": load_state_dict's path '" + path + "' must end in a dot");
  if (bound_) value_error(name_ + ": already loaded");
  std::vector<std::pair<std::string, std::shared_ptr<Resident>>> every;
  collect("", every, nullptr);
  // Params still to bind, by their first path; every path each is held at.
  std::vector<std::pair<std::string, std::shared_ptr<Resident>>> params;
  std::vector<std::string> held_paths;
  for (const auto& [p, r] : every) {
    held_paths.push_back(path + p);
    if (r->is_state || r->tensor.defined()) continue;
    bool seen = false;
    for (const auto& q : params) seen |= q.second == r;
    if (!seen) params.emplace_back(path + p, r);
  }
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  };
  std::vector<std::string> missing, extra, shapes, kinds;
  for (const auto& [p, r] : params) {
    const Tensor* t = find(p);
    if (!t) {
      missing.push_back(escaped(p));
      continue;
    }
    if (t->shape() != r->shape)
      shapes.push_back(escaped(p) + " " + to_string(t->shape()) + ", not " + to_string(r->shape));
    if (r->dtype == keep_dtype && !float_kind(t->dtype()))
      // A param that keeps the file's type takes floats or quantised blocks, never integers.
      kinds.push_back(escaped(p) + " " + std::string(iron::name(t->dtype())) + ", not a float or quantised type");
    else if (r->dtype != keep_dtype && float_kind(t->dtype()) != float_kind(r->dtype))
      kinds.push_back(escaped(p) + " " + std::string(iron::name(t->dtype())) + ", not " +
                      std::string(iron::name(r->dtype)));
    else if (r->dtype != keep_dtype && info(r->dtype).quantised && t->dtype() != r->dtype)
      kinds.push_back(escaped(p) + " " + std::string(iron::name(t->dtype())) + ", not " +
                      std::string(iron::name(r->dtype)) + " (quantising on load is not supported)");
  }
  // Names come from a checkpoint: escaped, and each list cut after its first 20 (the whole of
  // it at IRON_LOG=debug).
  for (const auto& [n, t] : tensors) {
    if (n.compare(0, path.size(), path) != 0) continue;
    if (std::find(held_paths.begin(), held_paths.end(), n) == held_paths.end()) extra.push_back(escaped(n));
  }
  std::sort(missing.begin(), missing.end());
  std::sort(extra.begin(), extra.end());
  if (!missing.empty() || !extra.empty() || !shapes.empty() || !kinds.empty()) {
    std::vector<std::string> parts;
    if (!missing.empty()) parts.push_back("missing " + cut_list(missing, "missing tensors"));
    if (!extra.empty()) parts.push_back("extra " + cut_list(extra, "extra tensors"));
    if (!shapes.empty()) parts.push_back("wrong shape " + cut_list(shapes, "tensors of the wrong shape"));
    if (!kinds.empty()) parts.push_back("wrong kind " + cut_list(kinds, "tensors of the wrong kind"));
    std::string m = name_ + ": cannot load: ";
    for (size_t i = 0; i < parts.size(); ++i) m += (i ? "; " : "") + parts[i];
    value_error(m);
  }
  for (const auto& [p, r] : params) {
    const Tensor& t = *find(p);
    if (r->dtype == keep_dtype) {
      r->dtype = t.dtype();
      r->bind(t);  // borrowed: a mapped checkpoint is not copied
    } else {
      r->bind(t.dtype() == r->dtype ? t : t.to(r->dtype));  // torch's copy_: cast once
    }
  }
  bound_ = true;
}

// ---- record and compile -------------------------------------------------------------------

std::string Graph::signature(const Shapes& shapes) const {
  std::string s;
  for (const auto& name : input_names_) {
    s += name + "=";
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](auto& p) { return p.first == name; });
    if (it == shapes.end())
      s += "absent";
    else
      s += to_string(it->second.shape) + std::string(iron::name(it->second.dtype));
    s += ";";
  }
  return s;
}

std::shared_ptr<Recording> Graph::record(const Shapes& shapes, bool checking) {
  std::vector<std::string> missing, unknown;
  for (size_t i = 0; i < input_names_.size(); ++i) {
    bool given = std::any_of(shapes.begin(), shapes.end(), [&](auto& p) { return p.first == input_names_[i]; });
    if (!given && !input_optional_[i]) missing.push_back(input_names_[i]);
  }
  for (const auto& [n, spec] : shapes)
    if (std::find(input_names_.begin(), input_names_.end(), n) == input_names_.end())
      unknown.push_back(n);
  if (!missing.empty() || !unknown.empty())
    type_error(name_ + ": shapes for [" + join(missing) + "] missing" +
               (unknown.empty() ? "" : "; [" + join(unknown) + "] are not inputs"));

  Recorder recorder(name_, profile_.empty() ? nullptr : &profile_);
  Recording& rec = recorder.recording();
  rec.input_names = input_names_;
  rec.values = values_;
  for (size_t i = 0; i < input_names_.size(); ++i) {
    auto it = std::find_if(shapes.begin(), shapes.end(), [&](auto& p) { return p.first == input_names_[i]; });
    if (it == shapes.end()) {
      *input_slots_[i] = Handle();
    } else {
      *input_slots_[i] = recorder.new_buffer(input_names_[i], Role::input, it->second.shape, it->second.dtype);
    }
    rec.inputs.push_back(*input_slots_[i]);
  }
  struct ClearSlots {
    std::vector<std::shared_ptr<Handle>>& slots;
    ~ClearSlots() {
      for (auto& s : slots) *s = Handle();
    }
  } clear{input_slots_};

  Outputs result = body();
  for (const Handle& h : result.tensors) {
    if (!h.defined()) value_error(name_ + ": body() returned an undefined handle");
    rec.outputs.push_back(dense(h));
  }
  for (const auto& [n, next] : result.carried.items) {
    // Compared through a named reference: clang before 16 cannot capture a structured binding.
    const std::string& carried_name = n;
    auto it = std::find_if(values_.begin(), values_.end(),
                           [&](const PerCall& v) { return v.name == carried_name; });
    if (it == values_.end() || it->kind != ValueKind::carried)
      type_error(name_ + ": carry names '" + n + "', which is not a carried value of this graph");
    if (const Handle* h = std::get_if<Handle>(&next)) {
      if (h->numel() != 1 || info(h->dtype()).floating)
        value_error(name_ + ": carried '" + n + "' is a one-element integer handle, not " + h->str());
      rec.carry.push_back({*it, dense(*h)});
    } else {
      rec.carry.push_back({*it, next});
    }
  }
  if (!rec.carry.empty()) {
    // The run's last command writes the next run's carried values.
    Step emit;
    std::string sources;
    for (const CarryItem& c : rec.carry) {
      if (const Handle* h = std::get_if<Handle>(&c.next)) {
        sources += 'h';
        emit.in.push_back(*h);
      } else {
        sources += 'v';
        emit.scalars.push_back(std::get<Affine>(c.next));
      }
    }
    emit.op = recorder.make("Emit", {{"sources", sources}});
    rec.emitted = recorder.scratch("emitted", {int64_t(rec.carry.size())}, i32);
    emit.out = {rec.emitted};
    recorder.add_step(std::move(emit));
  }
  fold_norms(rec, recorder);
  // In check mode a GELU stays a step, compared with its own reference (as the SwiGLU below).
  fold_epilogues(rec, recorder, /*with_activations=*/!checking);
  merge_matmuls(rec, recorder, /*with_swiglu=*/!checking);
  return std::make_shared<Recording>(std::move(rec));
}

CompiledGraph& Graph::compile(const Shapes& shapes, CompileOptions options) {
  if (chain_) settle();  // refused: a new version may grow the scratch the chained steps use
  // A graph's memory is on one device at a time: by default, the one its versions use.
  if (options.device.empty()) options.device = arena_->device().name();
  arena_->set_device(detail::device_named(options.device));
  std::string sig = signature(shapes) + (options.check ? "check" : "") + "t" + std::to_string(options.threads) + options.device;
  auto it = versions_.find(sig);
  if (it != versions_.end()) {
    if (options.feeds) it->second->emit_to(*options.feeds);
    return *it->second;
  }
  std::vector<std::string> unloaded;
  for (const auto& [path, r] : held()) {
    if (!r->is_state && !r->tensor.defined()) unloaded.push_back(path);
    arena_->name(r.get(), path);  // a state that does not fit, and each upload, named by its path
  }
  if (!unloaded.empty())
    type_error(name_ + ": " + join(unloaded) + (unloaded.size() == 1 ? " was" : " were") +
               " never loaded: call load_state_dict first");
  std::shared_ptr<Recording> recording = record(shapes, options.check);
  auto version = std::make_unique<CompiledGraph>(*this, recording, options);
  log(LogLevel::info, name_ + ": compiled a version for " + signature(shapes) + " " + version->report());
  version->signature_ = signature(shapes);
  if (options.feeds) version->emit_to(*options.feeds);
  CompiledGraph& ref = *version;
  versions_[sig] = std::move(version);
  return ref;
}

CompiledGraph& Graph::version_for(std::span<const Tensor> tensors) {
  if (tensors.size() > input_names_.size())
    type_error(name_ + ": takes at most " + std::to_string(input_names_.size()) + " tensors, got " +
               std::to_string(tensors.size()));
  Shapes shapes;
  for (size_t i = 0; i < tensors.size(); ++i) shapes.emplace_back(input_names_[i], InputSpec(tensors[i].shape(), tensors[i].dtype()));
  return compile(shapes);
}

RunResult Graph::reference(std::span<const Tensor> tensors, std::span<const ValueArg> values) {
  if (tensors.size() > input_names_.size())
    type_error(name_ + ": takes at most " + std::to_string(input_names_.size()) + " tensors");
  Shapes shapes;
  for (size_t i = 0; i < tensors.size(); ++i) shapes.emplace_back(input_names_[i], InputSpec(tensors[i].shape(), tensors[i].dtype()));
  std::string sig = signature(shapes);
  auto it = references_.find(sig);
  if (it == references_.end()) it = references_.emplace(sig, record(shapes)).first;
  const Recording& rec = *it->second;
  // The words: the values by slot, then checked like a call's.
  std::vector<int64_t> words(values_.size(), 0);
  std::vector<bool> given(values_.size(), false);
  for (const ValueArg& v : values) {
    const size_t slot = size_t(value_slot(values_, v.name, name_));
    check_value(v.name, v.value, name_);
    words[slot] = v.value;
    given[slot] = true;
  }
  for (size_t s = 0; s < values_.size(); ++s)
    if (!given[s] && value_defaults_[s]) words[s] = *value_defaults_[s], given[s] = true;
  for (const Constraint& c : rec.constraints) {
    if (!given[size_t(c.value.slot())])
      type_error(name_ + ": per-call value '" + c.value.value_name() + "' is missing");
    int64_t v = c.value.eval(words.data());
    if (v < c.lo || v >= c.hi)
      index_error(name_ + ": the values index or bound a view outside it: " + c.what + " is " +
                  std::to_string(v) + ", outside [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + ")");
  }
  if (!reference_states_) reference_states_ = std::make_shared<detail::ReferenceStates>();
  return detail::run_reference(rec, tensors, words.data(),
                               *std::static_pointer_cast<detail::ReferenceStates>(reference_states_));
}

Outputs Graph::operator()(std::vector<Handle> inputs, std::vector<std::pair<std::string, Affine>> values) {
  if (!Recorder::current())
    type_error(name_ + ": a graph is called like this only inside another graph's body; to run it on its own, "
                       "compile it and call what compile() returns");
  Recorder& r = *Recorder::current();
  if (inputs.size() > input_names_.size())
    type_error(name_ + ": takes " + std::to_string(input_names_.size()) + " input(s), got " + std::to_string(inputs.size()));
  inputs.resize(input_names_.size());
  std::vector<std::string> missing;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined() && !input_optional_[i]) missing.push_back(input_names_[i]);
  if (!missing.empty()) type_error(name_ + ": called without input(s) " + join(missing));
  Recorder::CalledGraph call{this, name_, std::vector<std::optional<Affine>>(values_.size())};
  for (size_t s = 0; s < values_.size(); ++s)
    if (value_defaults_[s]) call.values[s] = Affine(*value_defaults_[s]);
  for (const auto& [n, expression] : values) call.values[size_t(value_slot(values_, n, name_))] = expression;
  // Its inputs are the caller's handles while its body records; then they are unset again.
  std::vector<Handle> previous;
  for (size_t i = 0; i < inputs.size(); ++i) {
    previous.push_back(*input_slots_[i]);
    *input_slots_[i] = inputs[i];
  }
  struct Restore {
    Recorder& recorder;
    std::vector<std::shared_ptr<Handle>>& slots;
    std::vector<Handle>& previous;
    ~Restore() {
      recorder.leave_call();
      for (size_t i = 0; i < previous.size(); ++i) *slots[i] = previous[i];
    }
  };
  r.enter_call(std::move(call));
  Restore restore{r, input_slots_, previous};
  auto profile = enter_inline();
  return body();
}

ProfileScope Graph::enter_inline() { return ProfileScope(profile_, name_ + ": inline()"); }

ProfileScope::ProfileScope(const Profile& profile, const std::string& what) {
  Recorder& r = Recorder::require(what);
  recorder_ = &r;
  previous_ = r.profile();
  if (!profile.empty()) r.set_profile(&profile);
}

ProfileScope::~ProfileScope() { static_cast<Recorder*>(recorder_)->set_profile(previous_); }

void Graph::release() {
  settle();
  for (auto& [sig, v] : versions_) v->release();
  arena_->release();
}

// ---- a compiled version ---------------------------------------------------------------------

CompiledGraph::CompiledGraph(Graph& graph, std::shared_ptr<Recording> recording, CompileOptions options)
    : graph_(&graph), recording_(std::move(recording)), options_(options) {
  image_ = std::make_unique<detail::Image>(graph.arena(), *recording_, graph.value_defaults_, options_);
}

CompiledGraph::~CompiledGraph() = default;

const CompiledGraph::Result& CompiledGraph::operator()(std::span<const Tensor> tensors,
                                                       std::span<const ValueArg> values) {
  graph_->settle();
  return run_now(tensors, values);
}

const CompiledGraph::Result& CompiledGraph::run_now(std::span<const Tensor> tensors, std::span<const ValueArg> values) {
  image();
  image_->stage_inputs(tensors);
  image_->write_values(values);
  image_->run();
  image_->fill_result(result_);
  if (has_carry()) image_->emit_into(feeds_->image(), result_);
  return result_;
}

Run CompiledGraph::start(std::span<const Tensor> tensors, std::span<const ValueArg> values) {
  if (graph_->chain_) graph_->settle();  // refused while a chained loop runs (see settle)
  detail::RunQueue::Task task{this, {tensors.begin(), tensors.end()}, {}, {}};
  for (const ValueArg& v : values) task.values.emplace_back(std::string(v.name), v.value);
  Run run;
  run.version_ = this;
  run.queue_ = graph_->queue();
  run.ticket_ = run.queue_->push(std::move(task));
  return run;
}

void CompiledGraph::emit_to(CompiledGraph& target) {
  if (!has_carry()) value_error(recording_->graph + ": this version has no Emit step (its body returns no iron::carry)");
  if (target.graph_ != graph_) value_error(recording_->graph + ": an Emit feeds a version of its own graph");
  feeds_ = &target;
}

const RunResult& Run::wait() {
  if (!queue_) value_error("wait() on a run that was never started");
  queue_->wait(ticket_);
  return version_->result_;
}

bool Run::done() const { return queue_ && queue_->complete(ticket_); }

int64_t Run::carried_value(std::string_view name) const {
  if (!queue_ || !queue_->complete(ticket_)) value_error("carried_value() of a run not yet waited for");
  const std::vector<CarryItem>& carry = version_->recording().carry;
  const std::vector<int64_t>& values = queue_->carried(ticket_);
  for (size_t i = 0; i < carry.size() && i < values.size(); ++i)
    if (carry[i].target.name == name) return values[i];
  value_error(version_->recording().graph + ": no carried value '" + std::string(name) + "' in this run");
}

void Run::cancel() {
  if (queue_) queue_->cancel(ticket_);
}

const std::shared_ptr<detail::RunQueue>& Graph::queue() {
  if (!queue_) queue_ = std::make_shared<detail::RunQueue>();
  return queue_;
}

void Graph::settle() {
  if (queue_) queue_->drain();
  // A chain's steps make their words from what the step before left in the scratch: a call of
  // any version would overwrite it, and a compile or release could free memory queued steps use.
  if (chain_)
    value_error(name_ + ": a CarriedLoop's steps are running on the device; finish the loop (or leave it) before "
                "calling, starting, compiling or releasing a version of this graph");
}

namespace {
// The host's view of a device buffer: the memory itself where the host reaches it, else a copy.
Tensor host_view(const detail::Location& at, const Shape& shape, DType dtype) {
  if (char* host = at.host()) return Tensor::wrap(host, shape, dtype);
  Tensor copy = Tensor::empty(shape, dtype);
  at.buffer->read(at.offset, const_cast<void*>(copy.data()), copy.nbytes());
  return copy;
}
}  // namespace

Tensor CompiledGraph::read(const Held& x) {
  const Resident& r = *x.resident();
  detail::DeviceBuffer& memory = graph_->arena().place(x.resident());
  Tensor view = host_view({&memory, 0}, r.shape, r.dtype);
  // A copy (the host does not map the device's memory) is what push() sends back.
  if (!memory.host()) graph_->pushed_copies_[x.resident().get()] = view;
  return view;
}

Tensor CompiledGraph::read(const Handle& x) {
  if (!x.defined()) value_error("read() of an undefined handle");
  for (const auto& b : recording_->buffers)
    if (b == x.buffer()) return host_view(image().locate(*b), b->shape, b->dtype);
  value_error(recording_->graph + ": " + x.str() + " is not a buffer of this version");
}

void CompiledGraph::push(const Held& x) {
  auto& copies = graph_->pushed_copies_;
  auto copy = copies.find(x.resident().get());
  if (copy == copies.end()) return;  // read() gave the device's memory itself (or nothing)
  graph_->settle();  // no run may be using the memory while it is written
  graph_->arena().place(x.resident()).write(0, copy->second.data(), copy->second.nbytes());
  copies.erase(copy);
}

CompiledGraph& CompiledGraph::load() {
  image().load();
  upload();
  return *this;
}

void CompiledGraph::upload() {
  for (const auto& b : recording_->buffers)
    if (b->resident && !b->resident->is_state) graph_->arena().place(b->resident);
}

void CompiledGraph::release() {
  graph_->settle();
  image_.reset();
}

std::vector<std::string> CompiledGraph::reads() const {
  std::vector<std::string> out;
  for (const PerCall& v : recording_->values)
    if (image_ && image_->table().reads(v.slot)) out.push_back(v.name);
  return out;
}

std::string CompiledGraph::report() const {
  std::ostringstream o;
  o << "(" << recording_->steps.size() << " steps, " << recording_->buffers.size() << " buffers, "
    << (image_ ? image_->scratch_bytes() : 0) << " scratch bytes, "
    << (image_ ? image_->table().size() : 0) << " words)";
  return o.str();
}

detail::Image& CompiledGraph::image() {
  if (!image_) image_ = std::make_unique<detail::Image>(graph_->arena(), *recording_, graph_->value_defaults_, options_);
  return *image_;
}
bool CompiledGraph::has_carry() const { return !recording_->carry.empty(); }

VersionView CompiledGraph::describe() const {
  VersionView v;
  v.signature = signature_;
  for (const Step& step : recording_->steps) {
    StepView sv{step.op->name(), step.op->params(), step.op->tunables(), {}, {}, step.precision};
    for (const Handle& h : step.in) sv.inputs.push_back(h.shape());
    for (const Handle& h : step.out) sv.outputs.push_back(h.shape());
    v.steps.push_back(std::move(sv));
  }
  if (image_) {
    v.scratch_bytes = image_->scratch_bytes();
    v.output_bytes = image_->output_bytes();
    v.words = image_->table().size();
  }
  v.reads = reads();
  return v;
}

DeviceTime CompiledGraph::device_time() const { return image_ ? image_->device_time() : DeviceTime{}; }

std::string VersionView::str() const {
  std::ostringstream o;
  o << signature << ": " << steps.size() << " steps, " << scratch_bytes << " scratch bytes, "
    << output_bytes << " output bytes, " << words << " words";
  if (!reads.empty()) {
    o << ", reads";
    for (const auto& r : reads) o << " " << r;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepView& s = steps[i];
    o << "\n  " << i << " " << s.op << "(" << s.params.str() << ")";
    if (!s.tunables.empty()) o << " tunables(" << s.tunables.str() << ")";
    o << " " << name(s.precision) << ":";
    for (const Shape& sh : s.inputs) o << " " << to_string(sh);
    o << " ->";
    for (const Shape& sh : s.outputs) o << " " << to_string(sh);
  }
  return o.str();
}

GraphStats Graph::stats() const {
  GraphStats g;
  g.versions = versions_.size();
  g.scratch_bytes = arena_->scratch_bytes();
  g.state_bytes = arena_->state_bytes();
  for (const auto& [sig, v] : versions_)
    if (v->image_) g.output_bytes += v->image_->output_bytes();
  g.uploads = arena_->uploads_by_weight();
  return g;
}

std::string GraphStats::str() const {
  std::ostringstream o;
  o << versions << " version(s), scratch " << scratch_bytes << " bytes, states " << state_bytes
    << " bytes, outputs " << output_bytes << " bytes, " << uploads.size() << " weight(s) uploaded";
  for (const auto& [path, n] : uploads) o << "\n  " << path << ": " << n << (n == 1 ? " upload" : " uploads");
  return o.str();
}

int64_t RunResult::carried_value(std::string_view name) const {
  for (const auto& [n, v] : carried)
    if (n == name) return v;
  value_error("no carried value '" + std::string(name) + "' in this result");
}

}  // namespace iron
