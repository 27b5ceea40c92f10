// A matmul step over several weights that read the same `a` (the planner merges q, k and v, or
// gate and up: graph/fold.cpp). Each weight keeps its own kernel; the threads split the rows of
// all the weights as one list, so a thread reads one unbroken run of weight bytes where a step
// per weight gave it a short piece of each, and the step is one phase instead of several.
// With a SwiGLU or a GeGLU merged in, each thread takes the same rows of both weights and finishes
// silu(gate) * up (or gelu_tanh(gate) * up) on them itself: no phase, no barrier, for the gate.
#include "ops/elementwise/elementwise.hpp"
#include "ops/gemm/kernels.hpp"
#include "ops/op.hpp"

namespace iron::ops::gemm {

namespace {

class PartsKernel final : public cpu::Kernel {
 public:
  PartsKernel(std::vector<std::unique_ptr<RowRangeKernel>> parts, const cpu::KernelArgs& a, Gate gate)
      : parts_(std::move(parts)), gate_kind_(gate), features_(a.features ? *a.features : cpu::Features::host()) {
    if (gate_kind_ != Gate::none) {
      for (const cpu::Operand& o : a.out)
        if (o.dtype != f32) value_error("a matmul finished by a gate writes f32 outputs, not " + std::string(name(o.dtype)));
      gate_ = a.out.at(0);
      up_ = a.out.at(1);
      y_ = a.out.at(2);
      if (parts_.size() != 2 || gate_.shape != up_.shape || gate_.shape != y_.shape ||
          parts_[0]->rows_of_w() != parts_[1]->rows_of_w())
        value_error("a matmul finished by a gate takes two weights of as many rows, into outputs of one shape");
    }
  }

  int64_t multiply_adds() const override {
    int64_t n = 0;
    for (const auto& part : parts_) n += part->multiply_adds();
    return n;
  }

  void run(const int64_t* w, int thread, int threads) const override {
    // The part whose preparation the scratch holds (-1: none yet): a part that shares it
    // (the same `a`, laid out alike) needs no prepare() of its own.
    int prepared = -1;
    auto ready = [&](int part) {
      const int id = parts_[size_t(part)]->preparation();
      if (prepared >= 0 && (prepared == part || (id != 0 && id == parts_[size_t(prepared)]->preparation()))) return;
      parts_[size_t(part)]->prepare(w, thread);
      prepared = part;
    };

    if (gate_kind_ != Gate::none) {
      // The same rows of both weights, then gate(gate) * up on them, all on this thread (the
      // units are powers of two: the larger is a multiple of the other).
      const RowRangeKernel &gate = *parts_[0], &up = *parts_[1];
      const int64_t unit = std::max(gate.unit(w), up.unit(w)), n = gate.rows_of_w(), units = (n + unit - 1) / unit;
      const int64_t rows = y_.shape.size() < 2 ? 1 : y_.rows(w);
      const int64_t fewest = std::max(gate.fewest_chunk_units(w), up.fewest_chunk_units(w));
      shared_.run(units, fewest, thread, threads, [&](int64_t u0, int64_t u1) {
        const int64_t begin = u0 * unit, end = std::min(u1 * unit, n);
        ready(0);
        gate.run_rows(w, thread, begin, end);
        ready(1);
        up.run_rows(w, thread, begin, end);
        for (int64_t m = 0; m < rows; ++m)
          gated_f32(gate_kind_, gate_.data<float>(w) + m * n + begin, up_.data<float>(w) + m * n + begin,
                    y_.data<float>(w) + m * n + begin, end - begin, features_);
      });
      return;
    }
    // Each weight's rows in units of its loop; a thread takes runs of units across the weights.
    int64_t total = 0, fewest = 1;
    for (const auto& p : parts_) total += (p->rows_of_w() + p->unit(w) - 1) / p->unit(w);
    for (const auto& p : parts_) fewest = std::max(fewest, p->fewest_chunk_units(w));
    shared_.run(total, fewest, thread, threads, [&](int64_t first, int64_t last) {
      int64_t base = 0;
      for (size_t i = 0; i < parts_.size() && base < last; ++i) {
        const RowRangeKernel& p = *parts_[i];
        const int64_t unit = p.unit(w), units = (p.rows_of_w() + unit - 1) / unit;
        const int64_t lo = std::max(first, base), hi = std::min(last, base + units);
        if (lo < hi) {
          ready(int(i));
          p.run_rows(w, thread, (lo - base) * unit, std::min((hi - base) * unit, p.rows_of_w()));
        }
        base += units;
      }
    });
  }

 private:
  std::vector<std::unique_ptr<RowRangeKernel>> parts_;
  Gate gate_kind_;
  cpu::Features features_;
  cpu::Operand gate_, up_, y_;
  mutable cpu::SharedRanges shared_;  // each call's units, shared out among its threads
};

}  // namespace

std::unique_ptr<cpu::Kernel> parts_kernel(std::vector<std::unique_ptr<RowRangeKernel>> parts,
                                          const cpu::KernelArgs& a, Gate gate) {
  return std::make_unique<PartsKernel>(std::move(parts), a, gate);
}

}  // namespace iron::ops::gemm
