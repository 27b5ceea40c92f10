#include "graph/fold.hpp"

#include <algorithm>
#include <optional>

#include "iron/profile.hpp"

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

// Whether anything but the steps reads or writes buffer `b`: the outputs, carried values, host
// steps.
bool used_outside_steps(const Recording& rec, const BufferNode* b) {
  for (const Handle& o : rec.outputs)
    if (reads_or_writes(o, b)) return true;
  if (reads_or_writes(rec.emitted, b)) return true;
  for (const CarryItem& c : rec.carry)
    if (const Handle* ch = std::get_if<Handle>(&c.next); ch && reads_or_writes(*ch, b)) return true;
  for (const HostStep& hs : rec.host)
    for (const auto* list : {&hs.reads, &hs.writes})
      for (const Handle& h : *list)
        if (reads_or_writes(h, b)) return true;
  return false;
}

// Whether buffer `b` is read or written anywhere but by the steps in `skip`.
bool used_elsewhere(const Recording& rec, const BufferNode* b, const std::vector<size_t>& skip) {
  for (size_t j = 0; j < rec.steps.size(); ++j) {
    if (std::find(skip.begin(), skip.end(), j) != skip.end()) continue;
    for (const auto* list : {&rec.steps[j].in, &rec.steps[j].out})
      for (const Handle& h : *list)
        if (reads_or_writes(h, b)) return true;
  }
  return used_outside_steps(rec, b);
}

// The matmul steps that read norm step i's output as their `a`, or none when anything else
// touches it (another step, an output, a carried value, a host step) or when the norm's input
// may change before the last of them runs.
std::vector<size_t> foldable_readers(const Recording& rec, size_t i) {
  const Step& norm = rec.steps[i];
  const Handle& h = norm.out.at(0);
  const BufferNode* out = h.buffer().get();
  const Handle& x = norm.in.at(0);
  // x in f32, as h is: the readers then take the kernels they took on h, bit for bit.
  if (out->role != Role::scratch || h.dtype() != f32 || x.dtype() != f32 || !whole(h) || x.bounds() != h.bounds())
    return {};
  // The norm's weight is read once, when a reader's kernel is made: a resident weight at a fixed place.
  if (norm.in.size() > 1) {
    const Handle& g = norm.in[1];
    if (g.buffer()->role != Role::weight || !g.offset().is_constant() || g.layout() != Layout::dense || g.ids())
      return {};
  }
  const int64_t n = norm.op->params().integer("N");
  if (h.shape().empty() || h.shape().back() != n || used_outside_steps(rec, out)) return {};

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

// Step operator `op` remade with new params: each tunable from the profile recording is under
// where one of its entries matches the new params (`iron tune` tunes the steps as folded), else
// as `op` had it (so a choice made for the old params, or under an inline() graph's profile,
// carries over).
std::shared_ptr<Operator> remake(Recorder& recorder, const Operator& op, const Fields& params) {
  const Profile* profile = recorder.profile();
  const Fields chosen = profile ? profile->tunables_for(op.declaration(), params) : Fields{};
  Fields kept;
  for (const auto& [name, value] : op.tunables().items())
    if (!chosen.contains(name)) kept.set(name, value);
  return recorder.make(op.name(), params, kept);
}

// A matmul's params without its weight's rows: what two mergeable matmuls share.
Fields shared_params(const Step& s) {
  Fields f;
  for (const auto& [k, v] : s.op->params().items())
    if (k != "N") f.set(k, v);
  return f;
}

bool weight_is_n_by_k(const Step& s) {
  const Fields& p = s.op->params();
  return !p.contains("b_col_maj") || p.flag("b_col_maj");  // GEMV's weight is always (N, K)
}

// Whether matmul step `s` can join a merge that starts with `first`: the same op, params and
// precision, a plain weight of (N, K) and nothing after the epilogue, the same a (and norm
// weight), and no input that an earlier member writes.
bool joins(const Step& first, const std::vector<const Step*>& members, const Step& s) {
  if (!is_matmul(s) || s.op->name() != first.op->name() || s.precision != first.precision) return false;
  const Fields& p = s.op->params();
  if (p.flag("residual") || p.integer("parts") != 1 || p.text("then") != "none" || !weight_is_n_by_k(s)) return false;
  // Tunables too: a profile (or an inline() under another graph's) may have chosen differently.
  if (!(shared_params(s) == shared_params(first)) || !(s.op->tunables() == first.op->tunables()) ||
      s.in.size() != first.in.size())
    return false;
  if (!same_view(s.in[0], first.in[0])) return false;
  // The norm's weight (the last input) is one for all; biases are each member's own.
  if (p.flag("norm") && p.flag("norm_weighted") && !same_view(s.in.back(), first.in.back())) return false;
  // Merged, the members run at once on different threads: none may read what another writes,
  // and no two may write one buffer (conservative: disjoint views of one buffer would do).
  for (const Step* m : members) {
    for (const Handle& o : m->out)
      for (const Handle& i : s.in)
        if (reads_or_writes(i, o.buffer().get())) return false;
    for (const Handle& o : s.out)
      for (const auto* list : {&m->in, &m->out})
        for (const Handle& h : *list)
          if (reads_or_writes(h, o.buffer().get())) return false;
  }
  return true;
}

// Whether gate step `s` (SwiGLU or GeGLU) can finish merged gate-and-up step `pair` (gate its part 0): it reads
// the two outputs whole, in f32, and nothing else reads them (`steps`: the pair and s); and its
// own output, written while other threads still read the step's inputs, is none of them.
bool finishes(const Recording& rec, const Step& s, const Step& pair, const std::vector<size_t>& steps) {
  if ((s.op->name() != "SwiGLU" && s.op->name() != "GeGLU") || s.in.size() != 2 || s.out.size() != 1) return false;
  const Handle &gate = pair.out[0], &up = pair.out[1], &y = s.out[0];
  if (!same_view(s.in[0], gate) || !same_view(s.in[1], up) || !whole(gate) || !whole(up)) return false;
  // Both halves whole and alike: a SwiGLU may broadcast a row of up over gate's rows.
  if (up.shape() != gate.shape() || s.op->params().flag("broadcast_row")) return false;
  if (gate.dtype() != f32 || up.dtype() != f32 || y.dtype() != f32 || y.shape() != gate.shape()) return false;
  if (gate.buffer()->role != Role::scratch || up.buffer()->role != Role::scratch) return false;
  if (y.buffer() == gate.buffer() || y.buffer() == up.buffer()) return false;
  for (const Handle& h : pair.in)
    if (reads_or_writes(h, y.buffer().get()) || reads_or_writes(y, h.buffer().get())) return false;
  return !used_elsewhere(rec, gate.buffer().get(), steps) && !used_elsewhere(rec, up.buffer().get(), steps);
}

// Drops the steps marked in `removed`; each host step keeps its place among the others
// ("after_step": runs once steps [0, after_step) are done).
void drop_steps(Recording& rec, const std::vector<bool>& removed) {
  std::vector<size_t> before(rec.steps.size() + 1, 0);  // removed steps before index i
  for (size_t i = 0; i < rec.steps.size(); ++i) before[i + 1] = before[i] + (removed[i] ? 1 : 0);
  if (before.back() == 0) return;
  for (HostStep& hs : rec.host) hs.after_step -= before[hs.after_step];
  std::vector<Step> kept;
  kept.reserve(rec.steps.size() - before.back());
  for (size_t i = 0; i < rec.steps.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(rec.steps[i]));
  rec.steps = std::move(kept);
}

// Whether `h` is a resident row of n f32 values at a fixed place (a bias): read in place by the
// matmul that takes it.
bool resident_row(const Handle& h, int64_t n) {
  return h.buffer()->role == Role::weight && h.offset().is_constant() && h.layout() == Layout::dense && !h.ids() &&
         h.fixed_rows().empty() && h.numel() == n && h.dtype() == f32;
}

// Whether any step in (from, to), or a host step between them, touches buffer `b` (`writes`:
// only writes count).
bool touched_between(const Recording& rec, size_t from, size_t to, const BufferNode* b, bool writes) {
  for (size_t j = from + 1; j < to; ++j) {
    if (!writes)
      for (const Handle& h : rec.steps[j].in)
        if (reads_or_writes(h, b)) return true;
    for (const Handle& h : rec.steps[j].out)
      if (reads_or_writes(h, b)) return true;
  }
  for (const HostStep& hs : rec.host)
    if (hs.after_step > from && hs.after_step <= to) {
      for (const Handle& h : hs.writes)
        if (reads_or_writes(h, b)) return true;
      if (!writes)
        for (const Handle& h : hs.reads)
          if (reads_or_writes(h, b)) return true;
    }
  return false;
}

// The one step after `i` that touches matmul step i's output, if that output is an f32 scratch
// written whole, nothing but that step reads it (no output, carried value or host step) and the
// step only reads it, in the same view; else none.
std::optional<size_t> only_reader(const Recording& rec, size_t i) {
  const Handle& h = rec.steps[i].out.at(0);
  const BufferNode* b = h.buffer().get();
  if (b->role != Role::scratch || h.dtype() != f32 || !whole(h) || used_outside_steps(rec, b)) return std::nullopt;
  std::optional<size_t> reader;
  for (size_t j = 0; j < rec.steps.size(); ++j) {
    if (j == i) continue;
    const Step& s = rec.steps[j];
    for (const Handle& o : s.out)
      if (reads_or_writes(o, b)) return std::nullopt;
    for (const Handle& in : s.in) {
      if (!reads_or_writes(in, b)) continue;
      if (j < i || (reader && *reader != j) || !same_view(in, h)) return std::nullopt;
      reader = j;
    }
  }
  return reader;
}

// Whether another matmul reads matmul step i's `a` in the same view: the two may merge
// (merge_matmuls), which an activation folded into one of them would stop (Gemma's gate and up:
// one step over x is worth more than the GELU pass the fold saves).
bool may_merge(const Recording& rec, size_t i) {
  for (size_t j = 0; j < rec.steps.size(); ++j)
    if (j != i && is_matmul(rec.steps[j]) && !rec.steps[j].in.empty() && same_view(rec.steps[j].in[0], rec.steps[i].in[0]))
      return true;
  return false;
}

}  // namespace

int fold_epilogues(Recording& rec, Recorder& recorder, bool with_activations) {
  std::vector<bool> removed(rec.steps.size(), false);
  int folded = 0;
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    if (removed[i] || !is_matmul(rec.steps[i])) continue;
    // Each fold makes the next step's output the matmul's, so a chain (bias, then GELU, then a
    // residual) folds one link at a time.
    for (;;) {
      Step& s = rec.steps[i];
      const Fields& p = s.op->params();
      if (p.integer("parts") != 1 || p.text("then") != "none") break;
      const std::optional<size_t> j = only_reader(rec, i);
      if (!j) break;
      const Step& next = rec.steps[*j];
      const Handle& h = s.out[0];
      if (next.out.size() != 1) break;
      const Handle& y = next.out[0];
      // The result takes the matmul's place: it must be f32 (nothing rounds it but the matmul's
      // store, as the step's own store did), of the same rows, and touched by nothing in between.
      if (y.dtype() != f32 || y.shape() != h.shape() || y.bounds() != h.bounds() ||
          touched_between(rec, i, *j, y.buffer().get(), false))
        break;
      bool aliases = false;
      for (const Handle& in : s.in) aliases = aliases || reads_or_writes(y, in.buffer().get());
      const bool epilogue = p.contains("epilogue") && p.text("epilogue") != "none";
      const std::string& op = next.op->name();
      Fields params = p;
      if (op == "Add" && next.op->params().flag("broadcast_row") && same_view(next.in[0], h) && !aliases &&
          !p.flag("bias") && !p.flag("residual") && !epilogue && resident_row(next.in[1], p.integer("N"))) {
        // A bias: before the epilogue, after the norm's weight's place (the last input).
        params.set("bias", true);
        const bool norm_weight = p.flag("norm") && p.flag("norm_weighted");
        s.in.insert(s.in.end() - (norm_weight ? 1 : 0), next.in[1]);
      } else if (op == "Add" && !next.op->params().flag("broadcast_row") && !p.flag("residual") && next.in.size() == 2) {
        // A residual: h + r (or r + h: an f32 sum either way), r written before the matmul runs.
        const size_t other = same_view(next.in[0], h) ? 1 : 0;
        const Handle& r = next.in[other];
        if (!same_view(next.in[1 - other], h) || reads_or_writes(r, h.buffer().get()) || r.dtype() != f32 ||
            r.shape() != h.shape() || r.layout() != Layout::dense || r.ids() || aliases || reads_or_writes(y, r.buffer().get()) ||
            touched_between(rec, i, *j, r.buffer().get(), true))
          break;
        params.set("residual", true);
        s.in.insert(s.in.begin() + 2, r);
      } else if (op == "GELU" && with_activations && s.op->name() == "ProjectionGEMM" && !epilogue && !p.flag("residual") &&
                 !aliases && !may_merge(rec, i)) {
        // An activation: after the bias, as the ProjectionGEMM epilogue computes it (the GELU
        // kernel's own row function).
        params.set("epilogue", std::string(next.op->params().text("approximate") == "tanh" ? "gelu_tanh" : "gelu"));
      } else {
        break;
      }
      s.op = remake(recorder, *s.op, params);
      s.out[0] = Handle(y);
      // The folded step touches nothing now, so the next link's checks do not see it.
      rec.steps[*j].in.clear();
      rec.steps[*j].out.clear();
      removed[*j] = true;
      ++folded;
    }
  }
  drop_steps(rec, removed);
  return folded;
}

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
      s.op = remake(recorder, *s.op, params);
      s.in[0] = norm.in[0];
      if (np.flag("weighted")) s.in.push_back(norm.in.at(1));
    }
    removed[i] = true;
    ++folded;
  }
  drop_steps(rec, removed);
  return folded;
}

int merge_matmuls(Recording& rec, Recorder& recorder, bool with_swiglu) {
  // Each merge takes the place of its first step; the others are dropped at the end, so every
  // check below still sees the whole recording.
  std::vector<bool> removed(rec.steps.size(), false);
  // Host steps run between steps: a merge never spans one.
  auto host_before = [&](size_t at) {
    return std::any_of(rec.host.begin(), rec.host.end(), [&](const HostStep& h) { return h.after_step == at; });
  };
  for (size_t i = 0; i < rec.steps.size();) {
    const Step& first = rec.steps[i];
    size_t end = i + 1;
    std::vector<const Step*> members{&first};
    const bool plain = is_matmul(first) && !first.op->params().flag("residual") &&
                       first.op->params().integer("parts") == 1 && weight_is_n_by_k(first);
    while (plain && end < rec.steps.size() && !host_before(end) && joins(first, members, rec.steps[end]))
      members.push_back(&rec.steps[end++]);
    if (members.size() == 1) {
      ++i;
      continue;
    }
    Step merged;
    merged.precision = first.precision;
    merged.in = {first.in[0]};
    int64_t rows = 0;
    for (const Step* m : members) {
      merged.in.push_back(m->in[1]);
      merged.out.push_back(m->out[0]);
      rows += m->op->params().integer("N");
    }
    // Each member's bias (its input 2), then the norm's weight: the merged step's inputs.
    if (first.op->params().flag("bias"))
      for (const Step* m : members) merged.in.push_back(m->in[2]);
    if (first.op->params().flag("norm") && first.op->params().flag("norm_weighted")) merged.in.push_back(first.in.back());
    Fields params = first.op->params();
    params.set("N", rows);
    params.set("parts", int64_t(members.size()));
    // gate and up read by a SwiGLU (silu(gate) * up) or a GeGLU (gelu_tanh(gate) * up) and by
    // nothing else: it joins them.
    const size_t swiglu = end;
    if (with_swiglu && members.size() == 2 && swiglu < rec.steps.size() && !host_before(swiglu)) {
      const Step& s = rec.steps[swiglu];
      // The pair may have been recorded up first (a function's arguments are evaluated in any
      // order): the parts then swap, so that part 0 is the gate.
      const bool gate = s.op->name() == "SwiGLU" || s.op->name() == "GeGLU";
      if (gate && s.in.size() == 2 && same_view(s.in[0], merged.out[1]) &&
          same_view(s.in[1], merged.out[0])) {
        std::swap(merged.in[1], merged.in[2]);
        std::swap(merged.out[0], merged.out[1]);
      }
      if (finishes(rec, s, merged, {i, i + 1, swiglu})) {
        params.set("then", std::string(s.op->name() == "SwiGLU" ? "silu_mul" : "gelu_tanh_mul"));
        merged.out.push_back(s.out[0]);
        ++end;
      }
    }
    merged.op = remake(recorder, *first.op, params);
    rec.steps[i] = std::move(merged);
    for (size_t j = i + 1; j < end; ++j) removed[j] = true;
    i = end;
  }
  const auto count = std::count(removed.begin(), removed.end(), true);
  drop_steps(rec, removed);
  return int(count);
}

}  // namespace iron
