// The portable matmul kernel: plain loops for every layout and dtype. Weight tiles are turned
// into f32 rows once per tile and shared by every row of `a`.
#include "ops/gemm/kernels.hpp"
#include "ops/op.hpp"

namespace iron::ops::gemm {

namespace {

class MatmulKernel final : public RowRangeKernel {
 public:
  MatmulKernel(const cpu::KernelArgs& a, const MatmulConfig& c)
      : a_(a.in.at(0)),
        b_(a.in.at(1)),
        y_(a.out.at(0)),
        k_(c.k),
        n_(c.n),
        col_maj_(c.col_maj),
        epilogue_(c.epilogue),
        tile_n_(std::max<int64_t>(1, c.tile_n)),
        rows_of_a_(a, c) {
    if (!col_maj_ && info(b_.dtype).quantised)
      value_error("a quantised GEMM weight is (N, K), as a Linear stores it: use b_col_maj");
    if (c.residual) r_ = a.in.at(2);
    if (c.bias) bias_ = a.in.at(c.residual ? 3 : 2);
    residual_ = c.residual;
    has_bias_ = c.bias;
    features_ = a.features ? *a.features : cpu::Features::host();
    // Per-thread f32 rows (a row of a, a tile of b, a row of y), made once here, not per call.
    per_thread_ = k_ + k_ * tile_n_ + 2 * n_;
    scratch_ = cpu::Scratch(size_t(per_thread_));
  }

  int64_t rows_of_w() const override { return n_; }
  int64_t unit(const int64_t*) const override { return tile_n_; }
  int64_t multiply_adds() const override { return (a_.shape.size() < 2 ? 1 : a_.shape[0]) * k_ * n_; }

  void run_rows(const int64_t* w, int thread, int64_t begin, int64_t end) const override {
    const int64_t rows = a_.shape.size() < 2 ? 1 : a_.rows(w);
    float* a_row = scratch_.get(thread);
    float* b_rows = a_row + k_;
    float* y_row = b_rows + k_ * tile_n_;
    float* b_row = y_row + n_;
    if (col_maj_) {
      for (int64_t n0 = begin; n0 < end; n0 += tile_n_) {
        int64_t nt = std::min(tile_n_, end - n0);
        const float* b = nullptr;
        if (b_.dtype == f32) {
          b = b_.data<float>(w) + n0 * k_;
        } else {
          to_f32(b_.dtype, b_.address(w, n0 * k_), b_rows, nt * k_);
          b = b_rows;
        }
        for (int64_t m = 0; m < rows; ++m) {
          const float* a = rows_of_a_.row(w, m, a_row);
          for (int64_t j = 0; j < nt; ++j) {
            // Rounded to f32 first, as the matmul step's output was before the planner folded
            // the bias and the activation in.
            float v = float(dot(a, b + j * k_, k_));
            if (has_bias_) add_residual(bias_, w, n0 + j, &v, 1);
            finish_all(epilogue_, &v, 1, features_, /*exact=*/true);
            if (residual_) add_residual(r_, w, m * n_ + n0 + j, &v, 1);
            store_row(y_, w, m * n_ + n0 + j, &v, 1);
          }
        }
      }
      return;
    }
    // b (K, N): accumulate rows of b scaled by a's entries, over this thread's columns.
    const int64_t width = end - begin;
    for (int64_t m = 0; m < rows; ++m) {
      const float* a = rows_of_a_.row(w, m, a_row);
      std::fill(y_row, y_row + width, 0.0f);
      for (int64_t kk = 0; kk < k_; ++kk) {
        load_row(b_, w, kk * n_ + begin, b_row, width);
        float s = a[kk];
        for (int64_t j = 0; j < width; ++j) y_row[j] += s * b_row[j];
      }
      if (has_bias_) add_residual(bias_, w, begin, y_row, width);
      finish_all(epilogue_, y_row, width, features_, /*exact=*/true);
      if (residual_) add_residual(r_, w, m * n_ + begin, y_row, width);
      store_row(y_, w, m * n_ + begin, y_row, width);
    }
  }

 private:
  cpu::Operand a_, b_, y_, r_, bias_;
  int64_t k_, n_;
  bool residual_ = false, has_bias_ = false;
  cpu::Features features_;
  bool col_maj_;
  Epilogue epilogue_;
  int64_t tile_n_;
  RowsOfA rows_of_a_;
  int64_t per_thread_;
  cpu::Scratch scratch_;
};

}  // namespace

std::unique_ptr<RowRangeKernel> portable_kernel(const cpu::KernelArgs& a, const MatmulConfig& c) {
  return std::make_unique<MatmulKernel>(a, c);
}

}  // namespace iron::ops::gemm
