// SegmentMean: an encoder's mean pooling over a padded batch. x (rows, N) holds segments of
// `segment` rows (one sentence each); output row b is the mean of the first lengths[b] rows of
// segment b, where lengths (rows / segment,) i32 is read per call (the same graph input
// Attention's segments read; each held to [0, segment]). An empty segment gives zeros. Sums in
// double, each output rounded once.
#include <algorithm>

#include "ops/op.hpp"

namespace iron::ops {

namespace {

const Declaration kSegmentMean{"SegmentMean", nullptr, {{"segment", std::nullopt}, {"N", std::nullopt}}, {}};

class Kernel final : public cpu::Kernel {
 public:
  Kernel(int64_t segment, int64_t n, const cpu::KernelArgs& a)
      : segment_(segment), n_(n), x_(a.in.at(0)), lengths_(a.in.at(1)), y_(a.out.at(0)) {
    const int64_t batch = y_.shape.empty() ? 0 : y_.shape[0];
    if (x_.rank() != 2 || x_.shape[1] != n_ || x_.shape[0] != batch * segment_ || y_.rank() != 2 ||
        y_.shape[1] != n_ || lengths_.dtype != DType::i32 || lengths_.rank() != 1 || lengths_.shape[0] != batch)
      value_error("SegmentMean: x " + to_string(x_.shape) + ", lengths " + to_string(lengths_.shape) + " " +
                  std::string(name(lengths_.dtype)) + " and y " + to_string(y_.shape) +
                  " are not (batch * segment, N), (batch,) i32 and (batch, N)");
    // A row, the output row, then the double sums (8-byte aligned: 2N floats in).
    scratch_ = cpu::Scratch(size_t(4 * n_));
  }

  int64_t multiply_adds() const override { return x_.shape[0] * n_; }

  void run(const int64_t* w, int thread, int threads) const override {
    const auto [begin, end] = cpu::split(y_.shape[0], thread, threads);
    float* row = scratch_.get(thread);
    float* out = row + n_;
    double* sum = reinterpret_cast<double*>(row + 2 * n_);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t length = std::clamp<int64_t>(lengths_.data<int32_t>(w)[b], 0, segment_);
      std::fill(sum, sum + n_, 0.0);
      for (int64_t r = 0; r < length; ++r) {
        load_row(x_, w, (b * segment_ + r) * n_, row, n_);
        for (int64_t i = 0; i < n_; ++i) sum[i] += row[i];
      }
      for (int64_t i = 0; i < n_; ++i) out[i] = length > 0 ? float(sum[i] / double(length)) : 0.0f;
      store_row(y_, w, b * n_, out, n_);
    }
  }

 private:
  int64_t segment_, n_;
  cpu::Operand x_, lengths_, y_;
  cpu::Scratch scratch_;
};

struct SegmentMean : Operator {
  SegmentMean(Fields p, Fields t) : Operator(kSegmentMean, std::move(p), std::move(t)) {
    segment_ = params_.integer("segment");
    n_ = params_.integer("N");
    if (segment_ <= 0 || n_ <= 0) value_error("SegmentMean: segment and N are positive: " + params_.str());
  }

  void reference(const RefCall& c) const override {
    const RefOperand &x = c.in[0], &lengths = c.in[1], &y = c.out[0];
    for (int64_t b = 0; b < y.shape[0]; ++b) {
      const int64_t length = std::clamp<int64_t>(int64_t(lengths.data[b]), 0, segment_);
      for (int64_t i = 0; i < n_; ++i) {
        double sum = 0;
        for (int64_t r = 0; r < length; ++r) sum += double(x.data[(b * segment_ + r) * n_ + i]);
        y.data[b * n_ + i] = round_to(y.dtype, length > 0 ? float(sum / double(length)) : 0.0f);
      }
    }
  }

  Tolerance tolerance(Precision) const override { return {1e-6, 1e-6}; }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(segment_, n_, a);
  }

  int64_t segment_, n_;
};

}  // namespace

// Records its dispatches on Vulkan (segment_mean_vulkan.cpp).
void record_segment_mean(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry segment_mean_entry() {
  return entry<SegmentMean>(kSegmentMean, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_segment_mean));
}

}  // namespace iron::ops
