// Elementwise operators of one operand (SiLU, GELU): one scalar function, applied over the valid
// rows; the reference and the portable kernel both call it.
#pragma once

#include "ops/op.hpp"

namespace iron::ops {

class UnaryOp : public Operator {
 public:
  UnaryOp(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {}
  virtual float apply(float x) const = 0;
  /// apply() over `n` values in place, as the CPU offers; an operator may give a vector form.
  virtual void apply_row(float* v, int64_t n, const cpu::Features&) const {
    for (int64_t k = 0; k < n; ++k) v[k] = apply(v[k]);
  }

  void reference(const RefCall& c) const override {
    const RefOperand &x = c.in[0], &y = c.out[0];
    int64_t n = x.shape.empty() ? 1 : valid_rows(x) * row_elements(x.shape);
    for (int64_t i = 0; i < n; ++i) y.data[i] = round_to(y.dtype, apply(x.data[i]));
  }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(*this, a);
  }

 private:
  class Kernel final : public cpu::Kernel {
   public:
    Kernel(const UnaryOp& op, const cpu::KernelArgs& a)
        : op_(op), x_(a.in.at(0)), y_(a.out.at(0)), features_(a.features ? *a.features : cpu::Features::host()) {}
    void run(const int64_t* w, int thread, int threads) const override {
      int64_t n = x_.shape.empty() ? 1 : x_.rows(w) * x_.row_elements();
      auto [begin, end] = cpu::split(n, thread, threads, 64);
      float v[256];
      for (int64_t i = begin; i < end; i += 256) {
        int64_t m = std::min<int64_t>(256, end - i);
        load_row(x_, w, i, v, m);
        op_.apply_row(v, m, features_);
        store_row(y_, w, i, v, m);
      }
    }

   private:
    const UnaryOp& op_;
    cpu::Operand x_, y_;
    cpu::Features features_;
  };
};

/// Records a unary operator's dispatches on Vulkan (src/ops/unary_vulkan.cpp).
void record_unary(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

}  // namespace iron::ops
