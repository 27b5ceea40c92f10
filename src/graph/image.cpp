#include "graph/image.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/roundoff.hpp"
#include "core/threads.hpp"
#include "graph/reference.hpp"
#include "iron/error.hpp"

namespace iron::detail {

// ---- plan and lower -------------------------------------------------------------------------

Image::Image(Arena& arena, const Recording& recording,
             const std::vector<std::optional<int64_t>>& defaults, CompileOptions options)
    : arena_(arena), recording_(recording), defaults_(defaults), options_(options), plan_(recording),
      device_(arena.device()) {
  if (options_.threads <= 0) options_.threads = available_cpus();
  if (plan_.output_bytes() > 0) output_memory_ = device_.allocate(plan_.output_bytes(), recording_.graph + "'s outputs");
  arena_.reserve_scratch(plan_.scratch_bytes());
}

Image::~Image() = default;

Location Image::locate(const Place& place) {
  switch (place.region) {
    case Place::Region::resident:
      return {&arena_.place(place.resident), 0};
    case Place::Region::output:
      return {output_memory_.get(), place.offset};
    case Place::Region::scratch:
      break;
  }
  return {arena_.scratch(), place.offset};
}

void Image::read(const Place& place, int64_t offset, void* target, int64_t bytes) {
  const Location at = locate(place);
  at.buffer->read(at.offset + offset, target, bytes);
}

const char* Image::host_bytes(const Place& place, int64_t offset, int64_t bytes, std::vector<char>& copy) {
  const Location at = locate(place);
  if (const char* host = at.host()) return host + offset;
  copy.resize(size_t(bytes));
  at.buffer->read(at.offset + offset, copy.data(), bytes);
  return copy.data();
}

void Image::write(const Place& place, int64_t offset, const void* source, int64_t bytes) {
  const Location at = locate(place);
  at.buffer->write(at.offset + offset, source, bytes);
}

void Image::load() {
  if (linked_ != arena_.generation()) link();
}

void Image::link() {
  if (&device_ != &arena_.device())
    value_error(recording_.graph + ": this version was compiled for the " + device_.name() +
                " device, and the graph's memory is now on " + arena_.device().name() + ": compile it again");
  words_.assign(size_t(plan_.table().size()), 0);
  have_carried_.assign(size_t(plan_.table().values()), false);
  given_.assign(size_t(plan_.table().values()), false);
  retire_program();
  program_ = arena_.device().lower(plan_, [this](const Place& p) { return locate(p); }, options_.threads);
  linked_ = arena_.generation();
}

// ---- a call -------------------------------------------------------------------------------

void Image::write_values(std::span<const ValueArg> values) {
  std::fill(given_.begin(), given_.end(), false);
  const auto& decls = recording_.values;
  const WordTable& table = plan_.table();
  for (const ValueArg& v : values) {
    const size_t slot = size_t(value_slot(decls, v.name, recording_.graph));
    check_value(v.name, v.value, recording_.graph);
    words_[slot] = v.value;
    given_[slot] = true;
  }
  for (size_t slot = 0; slot < decls.size(); ++slot) {
    if (given_[slot] || !table.reads(int(slot))) continue;
    if (have_carried_[slot]) continue;  // the value the last run carried
    if (defaults_[slot]) {
      words_[slot] = *defaults_[slot];
      continue;
    }
    type_error(recording_.graph + ": per-call value '" + decls[slot].name + "' is missing" +
               (decls[slot].kind == ValueKind::carried ? " (a carried value: seed its first call)" : ""));
  }
  table.evaluate(words_.data());
  for (const CheckedConstraint& c : plan_.constraints()) {
    int64_t v = c.word.get(words_.data());
    if (v < c.lo || v >= c.hi) {
      std::ostringstream m;
      m << recording_.graph << ": the values index or bound a view outside it: " << c.source->what
        << " is " << v << ", outside [" << c.lo << ", " << c.hi << ")";
      index_error(m.str());
    }
  }
  for (size_t i = size_t(table.values()); i < words_.size(); ++i)
    if (words_[i] <= -kValueLimit || words_[i] >= kValueLimit)
      value_error(recording_.graph + ": the derived word " + table.derived()[i - size_t(table.values())].str() +
                  " = " + std::to_string(words_[i]) + " is outside 30 bits");
}

void Image::stage_inputs(std::span<const Tensor> tensors) {
  load();
  size_t expected = 0;
  for (const Handle& h : recording_.inputs) expected += h.defined();
  if (tensors.size() != expected)
    type_error(recording_.graph + ": takes " + std::to_string(expected) + " tensor(s), got " +
               std::to_string(tensors.size()));
  size_t k = 0;
  for (size_t i = 0; i < recording_.inputs.size(); ++i) {
    const Handle& h = recording_.inputs[i];
    if (!h.defined()) continue;
    const Tensor& t = tensors[k++];
    if (t.shape() != h.shape() || t.dtype() != h.dtype())
      value_error(recording_.graph + ": input '" + recording_.input_names[i] + "' is " +
                  to_string(t.shape()) + " " + std::string(name(t.dtype())) + "; this version takes " +
                  to_string(h.shape()) + " " + std::string(name(h.dtype())) +
                  " (call the graph to compile a version for another shape)");
    write(plan_.place(*h.buffer()), 0, t.data(), t.nbytes());
  }
}

void Image::check_host_ids() {
  const int64_t* words = words_.data();
  for (const HostIds& c : plan_.host_ids()) {
    const int64_t n = c.ids.shape.empty() ? 1 : c.ids.valid[0].get(words);
    const auto* ids = reinterpret_cast<const int32_t*>(
        host_bytes(c.ids.place, byte_offset(c.ids), n * int64_t(sizeof(int32_t)), ids_));
    for (int64_t k = 0; k < n; ++k)
      if (ids[k] < 0 || ids[k] >= c.table_rows) {
        std::ostringstream m;
        if (!c.what.empty()) {
          m << recording_.graph << ": value " << ids[k] << " at position " << c.ids.offset.get(words) + k
            << " of input '" << c.input << "' is outside [0, " << c.table_rows << "): " << c.what;
          index_error(m.str());
        }
        m << recording_.graph << ": id " << ids[k] << " at position " << c.ids.offset.get(words) + k
          << " of input '" << c.input << "' is outside " << c.table << "'s " << c.table_rows
          << " rows [0, " << c.table_rows << ")";
        index_error(m.str());
      }
  }
}

void Image::run() {
  load();
  check_host_ids();
  if (!options_.check && recording_.host.empty()) {
    program_->run(words_.data());
    return;
  }
  // Each step on its own dispatch: to compare it with its reference, or to run host steps
  // between the device's.
  size_t host = 0;
  for (size_t i = 0; i <= program_->commands(); ++i) {
    for (; host < recording_.host.size() && recording_.host[host].after_step == i; ++host) run_host(recording_.host[host]);
    if (i == program_->commands()) break;
    if (options_.check)
      check_step(i);
    else
      program_->run_one(i, words_.data());
  }
}

void Image::run_host(const HostStep& step) {
  std::vector<Tensor> views;
  // Where the device's memory is not the host's, a handle is copied in before the function and
  // a written one copied back after it.
  struct Copied {
    const Place* place;
    int64_t offset;
    Tensor tensor;
  };
  std::vector<Copied> written;
  auto view = [&](const Handle& h, bool cut, bool writes) {
    const Place& place = plan_.place(*h.buffer());
    const int64_t offset = storage_bytes(h.dtype(), h.offset().eval(words_.data()));
    Tensor t;
    if (char* host = locate(place).host()) {
      t = Tensor::wrap(host + offset, h.shape(), h.dtype());
    } else {
      t = Tensor::empty(h.shape(), h.dtype());
      read(place, offset, const_cast<void*>(t.data()), t.nbytes());
      if (writes) written.push_back({&place, offset, t});
    }
    if (cut && h.rank() > 0 && h.valid(0)) t = t.rows(0, h.valid(0)->eval(words_.data()));
    return t;
  };
  for (const Handle& h : step.reads) views.push_back(view(h, true, false));
  for (const Handle& h : step.writes) views.push_back(view(h, false, true));
  step.fn(views);
  for (const Copied& c : written) write(*c.place, c.offset, c.tensor.data(), c.tensor.nbytes());
}

void Image::emit(int64_t* next) {
  if (!plan_.emitted()) return;  // no carried values
  const size_t n = plan_.carry_slots().size();
  const auto* emitted = reinterpret_cast<const int32_t*>(
      host_bytes(plan_.emitted()->place, byte_offset(*plan_.emitted()), int64_t(n * sizeof(int32_t)), emitted_));
  for (size_t i = 0; i < n; ++i) next[i] = emitted[i];
}

void Image::fill_result(CompiledGraph::Result& result) {
  const std::vector<View>& outputs = plan_.outputs();
  output_copies_.resize(outputs.size());
  result.outputs.resize(outputs.size());
  result.valid.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const View& o = outputs[i];
    Tensor& t = result.outputs[i];
    Shape& valid = result.valid[i];
    valid.resize(o.shape.size());  // sized on the first call: no allocation after it
    for (size_t a = 0; a < o.shape.size(); ++a) valid[a] = o.valid[a].get(words_.data());
    // Cut to the rows valid this call, as the reference's outputs are. The host reads the
    // device's memory, or the copy made of it now.
    const int64_t rows = o.shape.empty() ? 0 : valid[0];
    const char* at = host_bytes(o.place, byte_offset(o), storage_bytes(o.dtype, element_count(o.shape)), output_copies_[i]);
    if (t.data() != at || (!o.shape.empty() && t.shape()[0] != rows)) {
      t = Tensor::borrow(at, o.shape, o.dtype);
      if (!o.shape.empty()) t = t.rows(0, rows);
    }
  }
  int64_t next[kMaxCarried];
  if (plan_.carry_slots().size() > kMaxCarried) value_error("more than 64 carried values");
  emit(next);
  set_carried(next, result);
}

void Image::set_carried(const int64_t* next, CompiledGraph::Result& result) {
  const size_t n = plan_.carry_slots().size();
  if (result.carried.size() != n) {
    result.carried.clear();
    for (const CarryItem& c : recording_.carry) result.carried.emplace_back(c.target.name, 0);
  }
  for (size_t i = 0; i < n; ++i) {
    if (next[i] < 0 || next[i] >= kValueLimit)
      value_error(recording_.graph + ": carried value '" + recording_.carry[i].target.name + "' became " +
                  std::to_string(next[i]) + ", outside 30 bits [0, 2^30)");
    result.carried[i].second = next[i];
  }
}

void Image::emit_into(Image& target, const CompiledGraph::Result& result) {
  target.load();
  if (&target != this)
    for (size_t slot = 0; slot < given_.size(); ++slot)
      if (given_[slot]) {
        target.words_[slot] = words_[slot];
        target.have_carried_[slot] = true;
      }
  for (size_t i = 0; i < plan_.carry_slots().size(); ++i) {
    const size_t slot = size_t(plan_.carry_slots()[i]);
    target.words_[slot] = result.carried[i].second;
    target.have_carried_[slot] = true;
  }
}

// ---- steps chained on the device ----------------------------------------------------------

std::unique_ptr<StepChain> Image::chain(int depth) {
  if (options_.check || !recording_.host.empty() || !plan_.emitted()) return nullptr;
  load();
  write_values({});  // the values the last run carried: the first step's words, checked
  check_host_ids();
  return program_->chain(words_.data(), depth);
}

void Image::chained_step(const int64_t* next, CompiledGraph::Result& result) {
  set_carried(next, result);
  emit_into(*this, result);
}

void Image::refused_step() {
  // The words this step would have had, from the carried values of the step before: the same
  // checks a call makes find what the device refused.
  write_values({});
  value_error(recording_.graph + ": the device refused a chained step's words that the host finds within bounds");
}

DeviceTime Image::device_time() const {
  DeviceTime t = earlier_;
  if (program_) {
    const DeviceTime now = program_->device_time();
    t.runs += now.runs;
    t.seconds += now.seconds;
    t.dispatches = now.dispatches;
  }
  return t;
}

void Image::retire_program() {
  if (!program_) return;
  const DeviceTime t = program_->device_time();
  earlier_.runs += t.runs;
  earlier_.seconds += t.seconds;
  program_.reset();
}

void Image::release() {
  retire_program();
  linked_ = 0;
}

// Check mode: each step on its own, its outputs compared with its operator's reference run on
// the same inputs, failing at the first element outside the tolerance.
void Image::check_step(size_t i) {
  const Step& step = recording_.steps[i];
  std::vector<std::vector<float>> before_in, before_out;
  auto snapshot = [&](const Handle& h) {
    const BufferNode& b = *h.buffer();
    std::vector<char> bytes(size_t(storage_bytes(b.dtype, element_count(b.shape))));
    read(plan_.place(b), 0, bytes.data(), int64_t(bytes.size()));
    std::vector<float> f(size_t(element_count(b.shape)));
    to_f32(b.dtype, bytes.data(), f.data(), int64_t(f.size()));
    return f;
  };
  for (const Handle& h : step.in) before_in.push_back(snapshot(h));
  for (const Handle& h : step.out) before_out.push_back(snapshot(h));
  program_->run_one(i, words_.data());
  RefCall call;
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(step.in.size() + step.out.size());
  auto resolve = [&](const Handle& h, std::vector<float>& data) {
    std::vector<int64_t>* gathered = nullptr;
    if (h.ids()) {
      std::vector<float> ids = snapshot(*h.ids());
      rows.emplace_back();
      int64_t offset = h.ids()->offset().eval(words_.data());
      for (int64_t r = 0; r < h.shape()[0]; ++r) rows.back().push_back(int64_t(ids[size_t(offset + r)]));
      gathered = &rows.back();
    } else if (!h.fixed_rows().empty()) {
      rows.push_back(h.fixed_rows());
      gathered = &rows.back();
    }
    return reference_operand(h, data.data(), words_.data(), gathered);
  };
  for (size_t k = 0; k < step.in.size(); ++k) call.in.push_back(resolve(step.in[k], before_in[k]));
  for (size_t k = 0; k < step.out.size(); ++k) call.out.push_back(resolve(step.out[k], before_out[k]));
  for (const Affine& s : step.scalars) call.scalars.push_back(s.eval(words_.data()));
  step.op->reference(call);
  const Tolerance contract = step.op->tolerance(step.precision);
  for (size_t k = 0; k < step.out.size(); ++k) {
    // The reference rounds its wide result once to a narrow output dtype (bf16, f16) and the
    // kernel its f32 result: the two may round to neighbours, one unit in the last place apart,
    // so that rounding is allowed on top of the operator's contract.
    Tolerance tol = contract;
    const DType out = step.out[k].dtype();
    if (out != f32 && info(out).floating) tol.rtol += 2 * unit_roundoff(out);
    std::vector<float> got = snapshot(step.out[k]);
    for (size_t e = 0; e < got.size(); ++e) {
      if (!tol.admits(got[e], before_out[k][e])) {
        std::ostringstream m;
        m << recording_.graph << ": check failed at step " << i << " (" << step.op->str()
          << "): output " << step.out[k].name() << " element " << e << " is " << got[e]
          << ", its reference " << before_out[k][e] << " (tolerance atol " << tol.atol
          << ", rtol " << tol.rtol << " at precision " << name(step.precision) << ")";
        value_error(m.str());
      }
    }
  }
}

}  // namespace iron::detail
