#include "graph/plan.hpp"

#include <algorithm>

#include "iron/error.hpp"

namespace iron::detail {

// ---- words --------------------------------------------------------------------------------

WordTable::WordTable(const std::vector<PerCall>& values) : values_(int(values.size())) {
  read_.assign(values.size(), false);
}

WordRef WordTable::ref(const Affine& a) {
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

// ---- places ---------------------------------------------------------------------------------

bool Place::overlaps(const Place& o) const {
  if (region != o.region) return false;
  if (region == Region::resident) return resident == o.resident;
  return offset < o.offset + o.bytes && o.offset < offset + bytes;
}

namespace {
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
int64_t buffer_bytes(const BufferNode& b) { return storage_bytes(b.dtype, element_count(b.shape)); }
}  // namespace

VersionPlan::VersionPlan(const Recording& recording) : recording_(recording), table_(recording.values) {
  place_buffers();
  for (const Step& step : recording_.steps) {
    StepPlan s;
    for (const Handle& h : step.in) s.in.push_back(make_view(h));
    for (const Handle& h : step.out) s.out.push_back(make_view(h));
    for (const Affine& a : step.scalars) s.scalars.push_back(table_.ref(a));
    s.precision = step.precision;
    steps_.push_back(std::move(s));
  }
  mark_barriers();
  for (const Step& step : recording_.steps)
    for (const auto* handles : {&step.in, &step.out})
      for (const Handle& h : *handles)
        if (h.ids() && h.ids()->buffer()->role == Role::input)
          host_ids_.push_back({make_view(*h.ids()), h.buffer()->shape.at(0), h.buffer()->name, h.ids()->buffer()->name, ""});
  for (const IdLimit& l : recording_.id_limits)
    host_ids_.push_back({make_view(l.ids), l.rows, "", l.ids.buffer()->name, l.what});
  for (const Handle& h : recording_.outputs) outputs_.push_back(make_view(h));
  if (recording_.emitted.defined()) emitted_ = make_view(recording_.emitted);
  for (const Constraint& c : recording_.constraints) constraints_.push_back({table_.ref(c.value), c.lo, c.hi, &c});
  for (const CarryItem& c : recording_.carry) carry_slots_.push_back(c.target.slot);
}

// Buffer lifetimes packed into one scratch region: each buffer lives from the first step that
// touches it to the last (inputs from the start, outputs and carried handles to the end); two
// buffers share bytes only when their lifetimes do not overlap.
void VersionPlan::place_buffers() {
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

  // A scratch buffer nothing touches keeps offset -1: an error if anything asks for it.
  places_.assign(buffers.size(), Place{Place::Region::scratch, -1, nullptr, 0});
  for (size_t i = 0; i < buffers.size(); ++i) {
    places_[i].bytes = buffer_bytes(*buffers[i]);
    if (buffers[i]->resident) places_[i] = {Place::Region::resident, 0, buffers[i]->resident, places_[i].bytes};
  }
  // Outputs get this version's own memory, one after another: they must outlive the call of
  // any other version (which reuses the scratch) until this version's next call.
  for (const Handle& h : recording_.outputs) {
    Place& place = places_[size_t(h.buffer()->id)];
    const Role role = h.buffer()->role;
    if ((role != Role::scratch && role != Role::input) || place.region == Place::Region::output) continue;
    place.region = Place::Region::output;
    place.offset = output_bytes_;
    output_bytes_ += aligned(place.bytes);
  }

  // Largest first, each at the lowest offset clear of every placed buffer alive at the same time.
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if ((buffers[i]->role == Role::scratch || buffers[i]->role == Role::input) && last[i] >= -1 &&
        places_[i].region == Place::Region::scratch)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return places_[a].bytes > places_[b].bytes; });
  struct Span {
    int64_t begin, end;
    int first, last;
  };
  std::vector<Span> placed;
  for (size_t i : order) {
    const int64_t bytes = aligned(places_[i].bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Span& p : placed)
      if (p.first <= last[i] && first[i] <= p.last) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + bytes <= b) break;
      offset = std::max(offset, e);
    }
    places_[i].offset = offset;
    placed.push_back({offset, offset + bytes, first[i], last[i]});
    scratch_bytes_ = std::max(scratch_bytes_, offset + bytes);
  }
}

View VersionPlan::make_view(const Handle& h) {
  const BufferNode& b = *h.buffer();
  View v;
  v.place = places_.at(size_t(b.id));
  if (v.place.region == Place::Region::scratch && v.place.offset < 0)
    value_error("buffer " + b.name + " has no place in the arena");
  v.dtype = h.dtype();
  v.shape = h.shape();
  v.strides = h.strides();
  v.offset = table_.ref(h.offset());
  for (int a = 0; a < h.rank(); ++a) {
    const auto& bound = h.valid(a);
    v.valid.push_back(bound ? table_.ref(*bound) : WordRef{-1, h.shape()[size_t(a)]});
  }
  if (h.ids()) v.ids = std::make_shared<View>(make_view(*h.ids()));
  v.fixed_rows = h.fixed_rows();
  v.table_rows = b.shape.empty() ? 0 : b.shape[0];
  return v;
}

// Where each step needs a barrier: the places it reads and writes against those of the steps
// since the last one (buffers that share scratch bytes count as the same memory).
void VersionPlan::mark_barriers() {
  std::vector<Place> reads, writes;  // of the phase so far
  for (size_t i = 0; i < steps_.size(); ++i) {
    StepPlan& step = steps_[i];
    std::vector<Place> r, w;
    for (const View& v : step.in) {
      r.push_back(v.place);
      if (v.ids) r.push_back(v.ids->place);
    }
    for (const View& v : step.out) w.push_back(v.place);
    bool hazard = false;
    for (const Place& x : w) {
      for (const Place& y : reads) hazard |= x.overlaps(y);
      for (const Place& y : writes) hazard |= x.overlaps(y);
    }
    for (const Place& x : r)
      for (const Place& y : writes) hazard |= x.overlaps(y);
    if (hazard || i == 0) {
      step.barrier_before = i > 0;
      reads.clear();
      writes.clear();
    }
    reads.insert(reads.end(), r.begin(), r.end());
    writes.insert(writes.end(), w.begin(), w.end());
  }
}

}  // namespace iron::detail
