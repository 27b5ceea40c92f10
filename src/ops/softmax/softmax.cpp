// Softmax over the last axis of x (rows, N), times `scale` first; only the leading entries valid
// this call take part (a per-call length), the rest of each row is written as zero.
#include "ops/op.hpp"

namespace iron::ops {

namespace {
const Declaration kSoftmax{"Softmax", nullptr, {{"N", std::nullopt}, {"scale", 1.0}}, {}};

inline void softmax_row(const float* x, float* y, int64_t len, int64_t n, double scale) {
  if (len <= 0) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  double top = double(x[0]) * scale;
  for (int64_t i = 1; i < len; ++i) top = std::max(top, double(x[i]) * scale);
  double sum = 0;
  for (int64_t i = 0; i < len; ++i) sum += std::exp(double(x[i]) * scale - top);
  for (int64_t i = 0; i < len; ++i) y[i] = float(std::exp(double(x[i]) * scale - top) / sum);
  std::fill(y + len, y + n, 0.0f);
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const cpu::KernelArgs& a, int64_t n, double scale) : x_(a.in.at(0)), y_(a.out.at(0)), n_(n), scale_(scale) {
    scratch_ = cpu::Scratch(size_t(2 * n));
  }
  void run(const int64_t* w, int thread, int threads) const override {
    int last = x_.rank() - 1;
    int64_t rows = x_.rank() < 2 ? 1 : x_.rows(w) * (x_.row_elements() / n_);
    int64_t len = x_.extent(last, w);
    auto [begin, end] = cpu::split(rows, thread, threads);
    float* xr = scratch_.get(thread);
    float* yr = xr + n_;
    for (int64_t r = begin; r < end; ++r) {
      load_row(x_, w, r * n_, xr, len);
      softmax_row(xr, yr, len, n_, scale_);
      store_row(y_, w, r * n_, yr, n_);
    }
  }

 private:
  cpu::Operand x_, y_;
  int64_t n_;
  double scale_;
  cpu::Scratch scratch_;
};

struct Softmax : Operator {
  Softmax(Fields p, Fields t) : Operator(kSoftmax, std::move(p), std::move(t)) {
    n_ = params_.integer("N");
    if (n_ <= 0) value_error("Softmax N is positive, got " + std::to_string(n_));
  }
  void reference(const RefCall& c) const override {
    const RefOperand &x = c.in[0], &y = c.out[0];
    int64_t rows = x.shape.size() < 2 ? 1 : valid_rows(x) * (row_elements(x.shape) / n_);
    int64_t len = x.valid.back();
    for (int64_t r = 0; r < rows; ++r) {
      softmax_row(x.data + r * n_, y.data + r * n_, len, n_, params_.number("scale"));
      round_all(y.dtype, y.data + r * n_, n_);
    }
  }
  Tolerance tolerance(Precision) const override { return {1e-7, 1e-5}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(a, n_, params_.number("scale"));
  }
  int64_t n_;
};
}  // namespace

// Records its dispatches on Vulkan (softmax_vulkan.cpp).
void record_softmax(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry softmax_entry() { return entry<Softmax>(kSoftmax, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_softmax)); }

}  // namespace iron::ops
