// Scalar: writes the sum of per-call expressions (say position + rows) into a one-element i32,
// for a carried value that depends on two per-call values, which no single Affine can express.
#include "ops/op.hpp"

namespace iron::ops {

namespace {
const Declaration kScalar{"Scalar", nullptr, {{"terms", int64_t(1)}}, {}};

class Kernel final : public cpu::Kernel {
 public:
  explicit Kernel(const cpu::KernelArgs& a) : terms_(a.scalars), y_(a.out.at(0)) {}
  bool parallel() const override { return false; }
  void run(const int64_t* w, int, int) const override {
    int64_t sum = 0;
    for (const cpu::WordRef& t : terms_) sum += t.get(w);
    *y_.data<int32_t>(w) = int32_t(sum);
  }

 private:
  std::vector<cpu::WordRef> terms_;
  cpu::Operand y_;
};

struct Scalar : Operator {
  Scalar(Fields p, Fields t) : Operator(kScalar, std::move(p), std::move(t)) {}
  void reference(const RefCall& c) const override {
    int64_t sum = 0;
    for (int64_t s : c.scalars) sum += s;
    c.out[0].data[0] = float(sum);
  }
  Tolerance tolerance(Precision) const override { return {0, 0}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const { return std::make_unique<Kernel>(a); }
};
}  // namespace

// Records its dispatches on Vulkan (scalar_vulkan.cpp).
void record_scalar(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry scalar_entry() { return entry<Scalar>(kScalar, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_scalar)); }

}  // namespace iron::ops
