// Sample: the next token from a row of logits, as a one-element i32. Greedy here (the highest
// logit, the lowest id on a tie); temperature, top-k, top-p and seeds come with the real models.
#include "ops/op.hpp"

namespace iron::ops {

namespace {
const Declaration kSample{"Sample", nullptr, {{"N", std::nullopt}, {"mode", std::string("greedy")}}, {}};

inline int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
  return int32_t(best);
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const cpu::KernelArgs& a, int64_t n) : x_(a.in.at(0)), y_(a.out.at(0)), n_(n) {
    if (x_.dtype != f32) work_.assign(size_t(n), 0.0f);
  }
  bool parallel() const override { return false; }
  void run(const int64_t* w, int, int) const override {
    const float* x = x_.dtype == f32 ? x_.data<float>(w) : work_.data();
    if (x_.dtype != f32) load_row(x_, w, 0, work_.data(), n_);
    *y_.data<int32_t>(w) = argmax(x, n_);
  }

 private:
  cpu::Operand x_, y_;
  int64_t n_;
  mutable std::vector<float> work_;
};

struct Sample : Operator {
  Sample(Fields p, Fields t) : Operator(kSample, std::move(p), std::move(t)) {
    n_ = params_.integer("N");
    if (params_.text("mode") != "greedy")
      value_error("Sample mode '" + params_.text("mode") + "' is not supported yet (greedy is)");
  }
  void reference(const RefCall& c) const override { c.out[0].data[0] = float(argmax(c.in[0].data, n_)); }
  Tolerance tolerance(Precision) const override { return {0, 0}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const override {
    return std::make_unique<Kernel>(a, n_);
  }
  int64_t n_;
};
}  // namespace

CatalogEntry sample_entry() { return entry<Sample>(kSample); }

}  // namespace iron::ops
