#include "graph/image.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "devices/cpu/thread_pool.hpp"
#include "graph/reference.hpp"
#include "iron/error.hpp"
#include "ops/op.hpp"

namespace iron::detail {

// ---- words --------------------------------------------------------------------------------

WordTable::WordTable(const std::vector<PerCall>& values) : values_(int(values.size())) {
  read_.assign(values.size(), false);
}

cpu::WordRef WordTable::ref(const Affine& a) {
  if (a.is_constant()) return {-1, a.constant()};
  read_.at(size_t(a.slot())) = true;
  if (a.steps().empty()) return {a.slot(), 0};
  for (size_t i = 0; i < derived_.size(); ++i)
    if (derived_[i] == a) return {values_ + int(i), 0};
  derived_.push_back(a);
  return {values_ + int(derived_.size()) - 1, 0};
}

void WordTable::evaluate(int64_t* words) const {
  for (size_t i = 0; i < derived_.size(); ++i) words[size_t(values_) + i] = derived_[i].eval(words);
}

// ---- plan -----------------------------------------------------------------------------------

namespace {
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Image::Image(Arena& arena, const Recording& recording,
             const std::vector<std::optional<int64_t>>& defaults, CompileOptions options)
    : arena_(arena), recording_(recording), defaults_(defaults), options_(options),
      table_(recording.values) {
  if (options_.threads <= 0) options_.threads = cpu::available_cpus();
  plan();
}

Image::~Image() = default;

// Buffer lifetimes packed into one scratch region: each buffer lives from the first step that
// touches it to the last (inputs from the start, outputs and carried handles to the end); two
// buffers share bytes only when their lifetimes do not overlap.
void Image::plan() {
  const auto& buffers = recording_.buffers;
  const int end = int(recording_.steps.size());
  std::vector<int> first(buffers.size(), end + 1), last(buffers.size(), -2);
  auto touch = [&](const Handle& h, int step) {
    int id = h.buffer()->id;
    first[size_t(id)] = std::min(first[size_t(id)], step);
    last[size_t(id)] = std::max(last[size_t(id)], step);
    if (h.ids()) {
      int ids = h.ids()->buffer()->id;
      first[size_t(ids)] = std::min(first[size_t(ids)], step);
      last[size_t(ids)] = std::max(last[size_t(ids)], step);
    }
  };
  for (int s = 0; s < end; ++s) {
    for (const Handle& h : recording_.steps[size_t(s)].in) touch(h, s);
    for (const Handle& h : recording_.steps[size_t(s)].out) touch(h, s);
  }
  for (const Handle& h : recording_.inputs)
    if (h.defined()) touch(h, -1);
  for (const Handle& h : recording_.outputs) touch(h, end);
  if (recording_.emitted.defined()) touch(recording_.emitted, end);
  for (const HostStep& hs : recording_.host) {
    for (const Handle& h : hs.reads) touch(h, int(hs.after_step));
    for (const Handle& h : hs.writes) touch(h, int(hs.after_step));
  }

  // Outputs get this version's own memory, one after another: they must outlive the call of
  // any other version (which reuses the scratch) until this version's next call.
  output_offsets_.assign(buffers.size(), -1);
  for (const Handle& h : recording_.outputs) {
    const BufferNode& b = *h.buffer();
    if ((b.role != Role::scratch && b.role != Role::input) || output_offsets_[size_t(b.id)] >= 0) continue;
    output_offsets_[size_t(b.id)] = output_bytes_;
    output_bytes_ += aligned(storage_bytes(b.dtype, element_count(b.shape)));
  }
  if (output_bytes_ > 0) {
    output_memory_ = {static_cast<char*>(std::aligned_alloc(size_t(kAlign), size_t(output_bytes_))), std::free};
    if (!output_memory_) value_error(recording_.graph + ": cannot allocate " + std::to_string(output_bytes_) +
                                       " bytes for this version's outputs");
  }

  // Largest first, each at the lowest offset clear of every placed buffer alive at the same time.
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if ((buffers[i]->role == Role::scratch || buffers[i]->role == Role::input) && last[i] >= -1 &&
        output_offsets_[i] < 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return storage_bytes(buffers[a]->dtype, element_count(buffers[a]->shape)) >
           storage_bytes(buffers[b]->dtype, element_count(buffers[b]->shape));
  });
  offsets_.assign(buffers.size(), -1);
  struct Span {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Span> placed;
  for (size_t i : order) {
    int64_t bytes = aligned(storage_bytes(buffers[i]->dtype, element_count(buffers[i]->shape)));
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Span& p : placed)
      if (p.first <= last[i] && first[i] <= p.last) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + bytes <= b) break;
      offset = std::max(offset, e);
    }
    offsets_[i] = offset;
    placed.push_back({offset, offset + bytes, first[i], last[i]});
    scratch_bytes_ = std::max(scratch_bytes_, offset + bytes);
  }
  arena_.reserve_scratch(scratch_bytes_);

  // Words and the bounds to check each call.
  for (const Constraint& c : recording_.constraints)
    constraints_.push_back({table_.ref(c.value), c.lo, c.hi, &c});
  for (const CarryItem& c : recording_.carry) carry_slots_.push_back(c.target.slot);
  link();
}

char* Image::address(const BufferNode& buffer) {
  if (buffer.resident) return arena_.place(buffer.resident);
  if (int64_t own = output_offsets_.at(size_t(buffer.id)); own >= 0) return output_memory_.get() + own;
  int64_t offset = offsets_.at(size_t(buffer.id));
  if (offset < 0) value_error("buffer " + buffer.name + " has no place in the arena");
  return arena_.scratch() + offset;
}

cpu::Operand Image::operand(const Handle& h) {
  cpu::Operand o;
  o.base = address(*h.buffer());
  o.dtype = h.dtype();
  o.shape = h.shape();
  o.strides = h.strides();
  o.offset = table_.ref(h.offset());
  for (int a = 0; a < h.rank(); ++a) {
    const auto& bound = h.valid(a);
    o.valid.push_back(bound ? table_.ref(*bound) : cpu::WordRef{-1, h.shape()[size_t(a)]});
  }
  if (h.ids()) o.ids = std::make_shared<cpu::Operand>(operand(*h.ids()));
  o.fixed_rows = h.fixed_rows();
  o.table_rows = h.buffer()->shape.empty() ? 0 : h.buffer()->shape[0];
  if (h.buffer()->resident && !h.buffer()->resident->is_state) o.prepared = h.buffer()->resident->prepared;
  return o;
}

void Image::link() {
  std::vector<cpu::KernelArgs> args;
  for (const Step& step : recording_.steps) {
    cpu::KernelArgs a;
    for (const Handle& h : step.in) a.in.push_back(operand(h));
    for (const Handle& h : step.out) a.out.push_back(operand(h));
    for (const Affine& s : step.scalars) a.scalars.push_back(table_.ref(s));
    a.precision = step.precision;
    a.features = &cpu::Features::host();
    args.push_back(std::move(a));
  }
  host_ids_.clear();
  for (const Step& step : recording_.steps)
    for (const auto* handles : {&step.in, &step.out})
      for (const Handle& h : *handles)
        if (h.ids() && h.ids()->buffer()->role == Role::input)
          host_ids_.push_back({operand(*h.ids()), h.buffer()->shape.at(0), h.buffer()->name, h.ids()->buffer()->name});
  outputs_.clear();
  for (const Handle& h : recording_.outputs) outputs_.push_back(operand(h));
  emitted_ = recording_.emitted.defined() ? operand(recording_.emitted) : cpu::Operand{};
  words_.assign(size_t(table_.size()), 0);
  have_carried_.assign(size_t(table_.values()), false);
  given_.assign(size_t(table_.values()), false);
  program_ = lower_cpu(recording_, std::move(args), barriers(), options_.threads);
  linked_ = arena_.generation();
}

std::vector<bool> Image::barriers() {
  struct Range {
    uintptr_t begin, end;
    bool overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
  };
  auto range = [&](const Handle& h) {
    const BufferNode& b = *h.buffer();
    auto begin = reinterpret_cast<uintptr_t>(address(b));
    return Range{begin, begin + uintptr_t(storage_bytes(b.dtype, element_count(b.shape)))};
  };
  std::vector<bool> out(recording_.steps.size(), false);
  std::vector<Range> reads, writes;  // of the phase so far
  for (size_t i = 0; i < recording_.steps.size(); ++i) {
    const Step& step = recording_.steps[i];
    std::vector<Range> r, w;
    for (const Handle& h : step.in) {
      r.push_back(range(h));
      if (h.ids()) r.push_back(range(*h.ids()));
    }
    for (const Handle& h : step.out) w.push_back(range(h));
    bool hazard = false;
    for (const Range& x : w) {
      for (const Range& y : reads) hazard |= x.overlaps(y);
      for (const Range& y : writes) hazard |= x.overlaps(y);
    }
    for (const Range& x : r)
      for (const Range& y : writes) hazard |= x.overlaps(y);
    if (hazard || i == 0) {
      out[i] = i > 0;
      reads.clear();
      writes.clear();
    }
    reads.insert(reads.end(), r.begin(), r.end());
    writes.insert(writes.end(), w.begin(), w.end());
  }
  return out;
}

// ---- a call -------------------------------------------------------------------------------

void Image::write_values(std::span<const ValueArg> values) {
  std::fill(given_.begin(), given_.end(), false);
  const auto& decls = recording_.values;
  for (const ValueArg& v : values) {
    const size_t slot = size_t(value_slot(decls, v.name, recording_.graph));
    check_value(v.name, v.value, recording_.graph);
    words_[slot] = v.value;
    given_[slot] = true;
  }
  for (size_t slot = 0; slot < decls.size(); ++slot) {
    if (given_[slot] || !table_.reads(int(slot))) continue;
    if (have_carried_[slot]) continue;  // the value the last run carried
    if (defaults_[slot]) {
      words_[slot] = *defaults_[slot];
      continue;
    }
    type_error(recording_.graph + ": per-call value '" + decls[slot].name + "' is missing" +
               (decls[slot].kind == ValueKind::carried ? " (a carried value: seed its first call)" : ""));
  }
  table_.evaluate(words_.data());
  for (const CheckedConstraint& c : constraints_) {
    int64_t v = c.word.get(words_.data());
    if (v < c.lo || v >= c.hi) {
      std::ostringstream m;
      m << recording_.graph << ": the values index or bound a view outside it: " << c.source->what
        << " is " << v << ", outside [" << c.lo << ", " << c.hi << ")";
      index_error(m.str());
    }
  }
  for (size_t i = size_t(table_.values()); i < words_.size(); ++i)
    if (words_[i] <= -kValueLimit || words_[i] >= kValueLimit)
      value_error(recording_.graph + ": the derived word " + table_.derived()[i - size_t(table_.values())].str() +
                  " = " + std::to_string(words_[i]) + " is outside 30 bits");
}

void Image::stage_inputs(std::span<const Tensor> tensors) {
  if (linked_ != arena_.generation()) link();
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
    std::memcpy(address(*h.buffer()), t.data(), size_t(t.nbytes()));
  }
}

void Image::check_host_ids() const {
  const int64_t* words = words_.data();
  for (const HostIds& c : host_ids_) {
    const int32_t* ids = c.ids.data<int32_t>(words);
    const int64_t n = c.ids.rows(words);
    for (int64_t k = 0; k < n; ++k)
      if (ids[k] < 0 || ids[k] >= c.table_rows) {
        std::ostringstream m;
        m << recording_.graph << ": id " << ids[k] << " at position " << c.ids.offset.get(words) + k
          << " of input '" << c.input << "' is outside " << c.table << "'s " << c.table_rows
          << " rows [0, " << c.table_rows << ")";
        index_error(m.str());
      }
  }
}

void Image::run() {
  if (linked_ != arena_.generation()) link();
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
  auto view = [&](const Handle& h, bool cut) {
    Tensor t = Tensor::borrow(address(*h.buffer()) + storage_bytes(h.dtype(), h.offset().eval(words_.data())),
                              h.shape(), h.dtype());
    if (cut && h.rank() > 0 && h.valid(0)) t = t.rows(0, h.valid(0)->eval(words_.data()));
    return t;
  };
  for (const Handle& h : step.reads) views.push_back(view(h, true));
  for (const Handle& h : step.writes) {
    Tensor t = view(h, false);
    // A host step writes device state: hand it a writable view of that memory.
    views.push_back(Tensor::wrap(const_cast<void*>(t.data()), t.shape(), t.dtype()));
  }
  step.fn(views);
}

void Image::emit(int64_t* next) const {
  const int32_t* emitted = emitted_.data<int32_t>(words_.data());
  for (size_t i = 0; i < carry_slots_.size(); ++i) next[i] = emitted[i];
}

void Image::fill_result(CompiledGraph::Result& result) {
  if (result.outputs.size() != outputs_.size()) {
    result.outputs.clear();
    for (const cpu::Operand& o : outputs_)
      result.outputs.push_back(Tensor::borrow(o.address(words_.data()), o.shape, o.dtype));
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const cpu::Operand& o = outputs_[i];
    Tensor& t = result.outputs[i];
    // Cut to the rows valid this call, as the reference's outputs are.
    int64_t rows = o.shape.empty() ? 0 : o.extent(0, words_.data());
    if (t.data() != o.address(words_.data()) || (!o.shape.empty() && t.shape()[0] != rows)) {
      t = Tensor::borrow(o.address(words_.data()), o.shape, o.dtype);
      if (!o.shape.empty()) t = t.rows(0, rows);
    }
  }
  size_t n = carry_slots_.size();
  if (result.carried.size() != n) {
    result.carried.clear();
    for (const CarryItem& c : recording_.carry) result.carried.emplace_back(c.target.name, 0);
  }
  int64_t next[64];
  if (n > 64) value_error("more than 64 carried values");
  emit(next);
  for (size_t i = 0; i < n; ++i) {
    if (next[i] < 0 || next[i] >= kValueLimit)
      value_error(recording_.graph + ": carried value '" + recording_.carry[i].target.name + "' became " +
                  std::to_string(next[i]) + ", outside 30 bits [0, 2^30)");
    result.carried[i].second = next[i];
  }
}

void Image::emit_into(Image& target, const CompiledGraph::Result& result) {
  if (target.linked_ != target.arena_.generation()) target.link();
  if (&target != this)
    for (size_t slot = 0; slot < given_.size(); ++slot)
      if (given_[slot]) {
        target.words_[slot] = words_[slot];
        target.have_carried_[slot] = true;
      }
  for (size_t i = 0; i < carry_slots_.size(); ++i) {
    const size_t slot = size_t(carry_slots_[i]);
    target.words_[slot] = result.carried[i].second;
    target.have_carried_[slot] = true;
  }
}

void Image::release() {
  program_.reset();
  linked_ = 0;
}

// Check mode: each step on its own, its outputs compared with its operator's reference run on
// the same inputs, failing at the first element outside the tolerance.
void Image::check_step(size_t i) {
  const Step& step = recording_.steps[i];
  std::vector<std::vector<float>> before_in, before_out;
  auto snapshot = [&](const Handle& h) {
    const BufferNode& b = *h.buffer();
    std::vector<float> f(size_t(element_count(b.shape)));
    to_f32(b.dtype, address(b), f.data(), int64_t(f.size()));
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
    if (out != f32 && info(out).floating) tol.rtol += 2 * ops::unit_roundoff(out);
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
