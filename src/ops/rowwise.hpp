// Operators that map each row of x (and an optional weight row) to a row of y: RMSNorm and
// LayerNorm. One row function serves the reference and the portable kernel.
#pragma once

#include "ops/op.hpp"

namespace iron::ops {

class RowwiseOp : public Operator {
 public:
  RowwiseOp(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {
    n_ = params_.integer("N");
    if (n_ <= 0) value_error(d.name + ": N is positive, got " + std::to_string(n_));
  }
  /// y = f(x, weight) over one row of n entries (weight may be null), in f64 where it matters.
  virtual void row(const float* x, const float* weight, float* y, int64_t n) const = 0;
  double epsilon() const { return params_.number("epsilon"); }
  bool weighted() const { return params_.flag("weighted"); }

  void reference(const RefCall& c) const override {
    const RefOperand &x = c.in[0], &y = c.out[0];
    const float* weight = weighted() ? c.in.at(1).data : nullptr;
    int64_t rows = x.shape.size() < 2 ? 1 : valid_rows(x) * (row_elements(x.shape) / n_);
    for (int64_t r = 0; r < rows; ++r) {
      row(x.data + r * n_, weight, y.data + r * n_, n_);
      round_all(y.dtype, y.data + r * n_, n_);
    }
  }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const override {
    return std::make_unique<Kernel>(*this, a);
  }

 private:
  class Kernel final : public cpu::Kernel {
   public:
    Kernel(const RowwiseOp& op, const cpu::KernelArgs& a)
        : op_(op), x_(a.in.at(0)), y_(a.out.at(0)), n_(op.n_) {
      if (op.weighted()) {
        weight_.resize(size_t(n_));
        const cpu::Operand& w = a.in.at(1);
        // The weight is resident and never changes: convert it once.
        to_f32(w.dtype, w.address(nullptr), weight_.data(), n_);
      }
      scratch_ = cpu::Scratch(size_t(2 * n_));
    }
    void run(const int64_t* w, int thread, int threads) const override {
      int64_t rows = x_.shape.size() < 2 ? 1 : x_.rows(w) * (x_.row_elements() / n_);
      auto [begin, end] = cpu::split(rows, thread, threads);
      float* xr = scratch_.get(thread);
      float* yr = xr + n_;
      for (int64_t r = begin; r < end; ++r) {
        load_row(x_, w, r * n_, xr, n_);
        op_.row(xr, weight_.empty() ? nullptr : weight_.data(), yr, n_);
        store_row(y_, w, r * n_, yr, n_);
      }
    }

   private:
    const RowwiseOp& op_;
    cpu::Operand x_, y_;
    int64_t n_;
    std::vector<float> weight_;
    cpu::Scratch scratch_;
  };

  int64_t n_;
};

}  // namespace iron::ops
