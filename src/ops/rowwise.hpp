// Operators that map each row of x (and an optional weight row) to a row of y: RMSNorm and
// LayerNorm. One row function serves the reference and the portable kernel.
#pragma once

#include "ops/op.hpp"

namespace iron::ops {

class RowwiseOp : public Operator {
 public:
  /// The row in vector lanes on a processor with `f` (within the operator's tolerance of row(),
  /// which stays the reference): false, writing nothing, where no vector copy runs there.
  using VectorRow = bool (*)(const float* x, const float* weight, float* y, int64_t n, double epsilon,
                             const cpu::Features& f);

  RowwiseOp(const Declaration& d, Fields p, Fields t, VectorRow vector_row)
      : Operator(d, std::move(p), std::move(t)), n_(params_.integer("N")), vector_row_(vector_row) {
    if (n_ <= 0) value_error(d.name + ": N is positive, got " + std::to_string(n_));
  }
  /// y = f(x, weight) over one row of n entries (weight may be null), in f64 where it matters.
  virtual void row(const float* x, const float* weight, float* y, int64_t n) const = 0;
  /// row() as the CPU kernel computes it on a processor with `f`: the vector form where one runs.
  void kernel_row(const float* x, const float* weight, float* y, int64_t n, const cpu::Features& f) const {
    if (!vector_row_ || !vector_row_(x, weight, y, n, epsilon(), f)) row(x, weight, y, n);
  }
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

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(*this, a);
  }

 private:
  class Kernel final : public cpu::Kernel {
   public:
    Kernel(const RowwiseOp& op, const cpu::KernelArgs& a)
        : op_(op), x_(a.in.at(0)), y_(a.out.at(0)), n_(op.n_),
          features_(a.features ? *a.features : cpu::Features::host()) {
      if (op.weighted()) {
        g_ = a.in.at(1);
        // A weight (a param: `prepared` is set for weights alone) at a fixed place never
        // changes while this kernel lives: converted once. Any other weight row (a graph input,
        // a state, a step's output) is read each call.
        if (g_.prepared && !g_.offset.per_call()) {
          weight_.resize(size_t(n_));
          to_f32(g_.dtype, g_.address(nullptr), weight_.data(), n_);
        }
      }
      scratch_ = cpu::Scratch(size_t(3 * n_));
    }
    void run(const int64_t* w, int thread, int threads) const override {
      int64_t rows = x_.shape.size() < 2 ? 1 : x_.rows(w) * (x_.row_elements() / n_);
      auto [begin, end] = cpu::split(rows, thread, threads);
      if (begin >= end) return;
      float* xr = scratch_.get(thread);
      float* yr = xr + n_;
      const float* weight = weight_.empty() ? nullptr : weight_.data();
      if (op_.weighted() && !weight) {
        float* per_call = yr + n_;
        load_row(g_, w, 0, per_call, n_);
        weight = per_call;
      }
      // f32 rows are read and written in place.
      const float* x = x_.dtype == f32 ? x_.data<float>(w) : nullptr;
      float* y = y_.dtype == f32 ? y_.data<float>(w) : nullptr;
      for (int64_t r = begin; r < end; ++r) {
        if (!x) load_row(x_, w, r * n_, xr, n_);
        float* out = y ? y + r * n_ : yr;
        op_.kernel_row(x ? x + r * n_ : xr, weight, out, n_, features_);
        if (!y) store_row(y_, w, r * n_, yr, n_);
      }
    }

   private:
    const RowwiseOp& op_;
    cpu::Operand x_, y_, g_;
    int64_t n_;
    std::vector<float> weight_;  // a weight converted once, else empty
    cpu::Features features_;     // what kernel_row may use
    cpu::Scratch scratch_;
  };

  int64_t n_;
  VectorRow vector_row_;  // null: row() alone
};

/// Records a rowwise operator's dispatches on Vulkan (src/ops/rowwise_vulkan.cpp).
void record_rowwise(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

}  // namespace iron::ops
