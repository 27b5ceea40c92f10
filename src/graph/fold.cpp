#include "graph/fold.hpp"

#include <algorithm>

namespace iron {

namespace {

bool is_matmul(const Step& s) {
  const std::string& n = s.op->name();
  return n == "GEMM" || n == "ProjectionGEMM" || n == "GEMV";
}

bool reads_or_writes(const Handle& h, const BufferNode* b) {
  return h.defined() && (h.buffer().get() == b || (h.ids() && h.ids()->buffer().get() == b));
}

// Whether `h` is the whole of its buffer, dense, as a step's fresh output is.
bool whole(const Handle& h) {
  return h.layout() == Layout::dense && !h.ids() && h.fixed_rows().empty() && h.offset() == Affine(0) &&
         h.numel() == element_count(h.buffer()->shape);
}

// Whether `use` reads the same elements as `h` in the same shape and layout.
bool same_view(const Handle& use, const Handle& h) {
  return use.buffer() == h.buffer() && use.shape() == h.shape() && use.layout() == Layout::dense && !use.ids() &&
         use.fixed_rows().empty() && use.offset() == h.offset() && use.bounds() == h.bounds();
}

// The matmul steps that read norm step i's output as their `a`, or none when anything else
// touches it (another step, an output, a carried value, a host step) or when the norm's input
// may change before the last of them runs.
std::vector<size_t> foldable_readers(const Recording& rec, size_t i) {
  const Step& norm = rec.steps[i];
  const Handle& h = norm.out.at(0);
  const BufferNode* out = h.buffer().get();
  const Handle& x = norm.in.at(0);
  if (out->role != Role::scratch || h.dtype() != f32 || !whole(h) || x.bounds() != h.bounds()) return {};
  const int64_t n = norm.op->params().integer("N");
  if (h.shape().empty() || h.shape().back() != n) return {};
  for (const Handle& o : rec.outputs)
    if (reads_or_writes(o, out)) return {};
  if (reads_or_writes(rec.emitted, out)) return {};
  for (const CarryItem& c : rec.carry)
    if (const Handle* ch = std::get_if<Handle>(&c.next); ch && reads_or_writes(*ch, out)) return {};
  for (const HostStep& hs : rec.host)
    for (const auto* list : {&hs.reads, &hs.writes})
      for (const Handle& hh : *list)
        if (reads_or_writes(hh, out)) return {};

  std::vector<size_t> readers;
  for (size_t j = 0; j < rec.steps.size(); ++j) {
    if (j == i) continue;
    const Step& s = rec.steps[j];
    for (const Handle& o : s.out)
      if (reads_or_writes(o, out)) return {};
    for (size_t k = 0; k < s.in.size(); ++k) {
      if (!reads_or_writes(s.in[k], out)) continue;
      if (j < i || k != 0 || !is_matmul(s)) return {};
      const Fields& p = s.op->params();
      const size_t plain_inputs = 2 + (p.flag("residual") ? 1 : 0);
      if (p.flag("norm") || s.in.size() != plain_inputs || !same_view(s.in[k], h) || p.integer("K") != n) return {};
      readers.push_back(j);
    }
  }
  if (readers.empty()) return {};
  // The readers will read x instead of the norm's output: nothing may write x in between.
  const BufferNode* source = x.buffer().get();
  for (size_t j = i + 1; j <= readers.back(); ++j)
    for (const Handle& o : rec.steps[j].out)
      if (reads_or_writes(o, source)) return {};
  for (const HostStep& hs : rec.host)
    if (hs.after_step > i && hs.after_step <= readers.back())
      for (const Handle& w : hs.writes)
        if (reads_or_writes(w, source)) return {};
  return readers;
}

}  // namespace

int fold_norms(Recording& rec, Recorder& recorder) {
  std::vector<bool> removed(rec.steps.size(), false);
  int folded = 0;
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    if (rec.steps[i].op->name() != "RMSNorm") continue;
    const std::vector<size_t> readers = foldable_readers(rec, i);
    if (readers.empty()) continue;
    const Step& norm = rec.steps[i];
    const Fields& np = norm.op->params();
    for (size_t j : readers) {
      Step& s = rec.steps[j];
      Fields params = s.op->params();
      params.set("norm", true);
      params.set("norm_weighted", np.flag("weighted"));
      params.set("norm_epsilon", np.number("epsilon"));
      s.op = recorder.make(s.op->name(), params, s.op->tunables());
      s.in[0] = norm.in[0];
      if (np.flag("weighted")) s.in.push_back(norm.in.at(1));
    }
    removed[i] = true;
    ++folded;
  }
  if (folded == 0) return 0;
  // Drop the folded steps; host steps keep their place among the others.
  std::vector<size_t> before(rec.steps.size() + 1, 0);  // removed steps before index i
  for (size_t i = 0; i < rec.steps.size(); ++i) before[i + 1] = before[i] + (removed[i] ? 1 : 0);
  for (HostStep& hs : rec.host) hs.after_step -= before[hs.after_step];
  std::vector<Step> kept;
  kept.reserve(rec.steps.size() - size_t(folded));
  for (size_t i = 0; i < rec.steps.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(rec.steps[i]));
  rec.steps = std::move(kept);
  return folded;
}

}  // namespace iron
