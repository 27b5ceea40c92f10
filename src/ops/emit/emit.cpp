// Emit: the last command of a run that carries values. It writes each carried value's next value
// (a per-call expression, or the element of a one-element handle, a sampled token) into a small
// i32 buffer that becomes the next run's words: on a device with its words in device memory, no
// host step sits between two runs.
#include "ops/op.hpp"

namespace iron::ops {

namespace {
// `sources`: one letter per carried value, 'h' (the next input handle) or 'v' (the next scalar).
const Declaration kEmit{"Emit", nullptr, {{"sources", std::nullopt}}, {}};

inline int64_t element(const cpu::Operand& h, const int64_t* w) {
  if (h.dtype == i32) return *h.data<int32_t>(w);
  float f;
  to_f32(h.dtype, h.address(w), &f, 1);
  return int64_t(f);
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const cpu::KernelArgs& a, std::string sources)
      : handles_(a.in), scalars_(a.scalars), out_(a.out.at(0)), sources_(std::move(sources)) {}
  bool parallel() const override { return false; }
  void run(const int64_t* w, int, int) const override {
    int32_t* out = out_.data<int32_t>(w);
    size_t h = 0, s = 0;
    for (size_t i = 0; i < sources_.size(); ++i)
      out[i] = int32_t(sources_[i] == 'h' ? element(handles_[h++], w) : scalars_[s++].get(w));
  }

 private:
  std::vector<cpu::Operand> handles_;
  std::vector<cpu::WordRef> scalars_;
  cpu::Operand out_;
  std::string sources_;
};

struct Emit : Operator {
  Emit(Fields p, Fields t) : Operator(kEmit, std::move(p), std::move(t)) {
    for (char c : params_.text("sources"))
      if (c != 'h' && c != 'v') value_error("Emit sources are 'h' (a handle) or 'v' (a value), not '" + std::string(1, c) + "'");
  }
  void reference(const RefCall& c) const override {
    size_t h = 0, s = 0;
    const std::string& sources = params_.text("sources");
    for (size_t i = 0; i < sources.size(); ++i)
      c.out[0].data[i] = sources[i] == 'h' ? std::trunc(c.in[h++].data[0]) : float(c.scalars[s++]);
  }
  Tolerance tolerance(Precision) const override { return {0, 0}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(a, params_.text("sources"));
  }
};
}  // namespace

// Records its dispatches on Vulkan (emit_vulkan.cpp).
void record_emit(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry emit_entry() { return entry<Emit>(kEmit, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_emit)); }

}  // namespace iron::ops
