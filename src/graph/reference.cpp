#include "graph/reference.hpp"

#include "iron/error.hpp"

namespace iron::detail {

RefOperand reference_operand(const Handle& h, float* buffer, const int64_t* words,
                             const std::vector<int64_t>* rows) {
  RefOperand o;
  o.data = buffer + h.offset().eval(words);
  o.shape = h.shape();
  o.dtype = h.dtype();
  o.strides = h.strides();
  o.rows = rows;
  for (int a = 0; a < h.rank(); ++a) {
    const auto& bound = h.valid(a);
    o.valid.push_back(bound ? bound->eval(words) : h.shape()[size_t(a)]);
  }
  return o;
}

RunResult run_reference(const Recording& recording, std::span<const Tensor> tensors,
                                  const int64_t* words, ReferenceStates& states) {
  std::vector<std::vector<float>> data(recording.buffers.size());
  for (const auto& b : recording.buffers) {
    auto& d = data[size_t(b->id)];
    int64_t n = element_count(b->shape);
    if (b->role == Role::weight) {
      d.resize(size_t(n));
      if (!b->resident->tensor.defined() || !b->resident->tensor.data())
        value_error(b->resident->path + " was never loaded: call load_state_dict first");
      to_f32(b->resident->tensor.dtype(), b->resident->tensor.data(), d.data(), n);
    } else if (b->role == Role::state) {
      auto& s = states[b->resident.get()];
      if (s.size() != size_t(n)) s.assign(size_t(n), 0.0f);
    } else {
      d.assign(size_t(n), 0.0f);
    }
  }
  auto storage = [&](const BufferNode& b) -> std::vector<float>& {
    return b.role == Role::state ? states[b.resident.get()] : data[size_t(b.id)];
  };
  size_t k = 0;
  for (size_t i = 0; i < recording.inputs.size(); ++i) {
    const Handle& h = recording.inputs[i];
    if (!h.defined()) continue;
    if (k >= tensors.size()) type_error(recording.graph + ": too few tensors");
    const Tensor& t = tensors[k++];
    if (t.shape() != h.shape() || t.dtype() != h.dtype())
      value_error(recording.graph + ": input '" + recording.input_names[i] + "' is " +
                  to_string(t.shape()) + " " + std::string(name(t.dtype())) + ", recorded as " +
                  to_string(h.shape()) + " " + std::string(name(h.dtype())));
    to_f32(t.dtype(), t.data(), storage(*h.buffer()).data(), t.numel());
  }
  if (k != tensors.size())
    type_error(recording.graph + ": takes " + std::to_string(k) + " tensor(s), got " +
               std::to_string(tensors.size()));
  for (const IdLimit& l : recording.id_limits) {
    const std::vector<float>& ids = storage(*l.ids.buffer());
    const int64_t at = l.ids.offset().eval(words);
    for (int64_t r = 0; r < l.ids.shape()[0]; ++r) {
      const auto v = int64_t(ids[size_t(at + r)]);
      if (v < 0 || v >= l.rows)
        index_error(recording.graph + ": value " + std::to_string(v) + " at position " + std::to_string(at + r) +
                    " of input '" + l.ids.buffer()->name + "' is outside [0, " + std::to_string(l.rows) +
                    "): " + l.what);
    }
  }
  // A host step sees its handles in their own dtypes, as on the device: each read is converted
  // from the f32 storage (cut to its bound), each write converted back after the function.
  auto run_host = [&](const HostStep& hs) {
    std::vector<Tensor> views;
    std::vector<float*> places;
    auto convert_out = [&](const Handle& h, bool cut) {
      float* from = storage(*h.buffer()).data() + h.offset().eval(words);
      Shape shape = h.shape();
      if (cut && !shape.empty() && h.valid(0)) shape[0] = h.valid(0)->eval(words);
      Tensor t = Tensor::empty(shape, h.dtype());
      from_f32(h.dtype(), from, t.mutable_data(), t.numel());
      views.push_back(std::move(t));
      places.push_back(from);
    };
    for (const Handle& h : hs.reads) convert_out(h, true);
    for (const Handle& h : hs.writes) convert_out(h, false);
    hs.fn(views);
    for (size_t w = hs.reads.size(); w < views.size(); ++w)
      to_f32(views[w].dtype(), views[w].data(), places[w], views[w].numel());
  };
  size_t host_index = 0;
  for (size_t s = 0; s <= recording.steps.size(); ++s) {
    for (; host_index < recording.host.size() && recording.host[host_index].after_step == s; ++host_index)
      run_host(recording.host[host_index]);
    if (s == recording.steps.size()) break;
    const Step& step = recording.steps[s];
    RefCall call;
    std::vector<std::vector<int64_t>> rows;
    rows.reserve(step.in.size() + step.out.size());
    auto resolve = [&](const Handle& h) {
      const std::vector<int64_t>* gathered = nullptr;
      if (h.ids()) {
        const auto& ids = storage(*h.ids()->buffer());
        int64_t offset = h.ids()->offset().eval(words);
        rows.emplace_back();
        for (int64_t r = 0; r < h.shape()[0]; ++r) {
          int64_t id = int64_t(ids[size_t(offset + r)]);
          if (id < 0 || id >= h.buffer()->shape[0])
            index_error(recording.graph + ": id " + std::to_string(id) + " gathers outside " + h.name());
          rows.back().push_back(id);
        }
        gathered = &rows.back();
      } else if (!h.fixed_rows().empty()) {
        rows.push_back(h.fixed_rows());
        gathered = &rows.back();
      }
      return reference_operand(h, storage(*h.buffer()).data(), words, gathered);
    };
    for (const Handle& h : step.in) call.in.push_back(resolve(h));
    for (const Handle& h : step.out) call.out.push_back(resolve(h));
    for (const Affine& a : step.scalars) call.scalars.push_back(a.eval(words));
    step.op->reference(call);
  }
  RunResult out;
  for (const Handle& h : recording.outputs) {
    const float* from = storage(*h.buffer()).data() + h.offset().eval(words);
    Shape shape = h.shape();
    if (!shape.empty() && h.valid(0)) shape[0] = h.valid(0)->eval(words);
    out.outputs.push_back(Tensor::from(std::vector<float>(from, from + element_count(shape)), shape));
    Shape& valid = out.valid.emplace_back(h.shape());
    for (int a = 0; a < h.rank(); ++a)
      if (h.valid(a)) valid[size_t(a)] = h.valid(a)->eval(words);
  }
  // The carried values' next values, as the Emit step writes them: an expression of this call's
  // values, or the one element of a handle.
  for (const CarryItem& c : recording.carry) {
    int64_t next = 0;
    if (const Handle* h = std::get_if<Handle>(&c.next))
      next = int64_t(storage(*h->buffer())[size_t(h->offset().eval(words))]);
    else
      next = std::get<Affine>(c.next).eval(words);
    if (next < 0 || next >= kValueLimit)
      value_error(recording.graph + ": carried value '" + c.target.name + "' became " + std::to_string(next) +
                  ", outside 30 bits [0, 2^30)");
    out.carried.emplace_back(c.target.name, next);
  }
  return out;
}

}  // namespace iron::detail
