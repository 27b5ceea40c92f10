// GEMM: y (M, N) = a (M, K) @ b, with b (K, N), or (N, K) when b_col_maj (a weight as
// torch.nn.Linear stores it). GEMV: one row, always rounded once from f32 sums. ProjectionGEMM:
// a GEMM with an epilogue applied before the one rounding. Rows of `a` may be bounded per call.
#include "ops/gemm/gemm.hpp"

#include "ops/op.hpp"

namespace iron::ops {

namespace {

const Declaration kGEMM{"GEMM",
                        nullptr,
                        {{"M", std::nullopt},
                         {"K", std::nullopt},
                         {"N", std::nullopt},
                         {"b_col_maj", false},
                         {"precision", std::string("highest")}},
                        {{"tile_n", int64_t(16)}}};
const Declaration kProjectionGEMM{"ProjectionGEMM",
                                  &kGEMM,
                                  {{"M", std::nullopt},
                                   {"K", std::nullopt},
                                   {"N", std::nullopt},
                                   {"b_col_maj", false},
                                   {"precision", std::string("high")},
                                   {"epilogue", std::string("none")}},
                                  {{"tile_n", int64_t(16)}}};
const Declaration kGEMV{"GEMV", nullptr, {{"K", std::nullopt}, {"N", std::nullopt}}, {{"tile_n", int64_t(16)}}};

enum class Epilogue { none, relu, silu, gelu, gelu_tanh };

Epilogue epilogue_from(const std::string& e) {
  if (e == "none") return Epilogue::none;
  if (e == "relu") return Epilogue::relu;
  if (e == "silu") return Epilogue::silu;
  if (e == "gelu") return Epilogue::gelu;
  if (e == "gelu_tanh") return Epilogue::gelu_tanh;
  value_error("ProjectionGEMM epilogue is none, relu, silu, gelu or gelu_tanh, not '" + e + "'");
}

inline double finish(Epilogue e, double v) {
  switch (e) {
    case Epilogue::none:
      return v;
    case Epilogue::relu:
      return v > 0 ? v : 0;
    case Epilogue::silu:
      return v / (1.0 + std::exp(-v));
    case Epilogue::gelu:
      return 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
    case Epilogue::gelu_tanh:
      return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  return v;
}

// f32 dot product with eight independent partial sums (vectorisable without reassociation flags).
inline float dot(const float* a, const float* b, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < k; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

class MatmulKernel final : public cpu::Kernel {
 public:
  MatmulKernel(const cpu::KernelArgs& a, int64_t k, int64_t n, bool col_maj, Epilogue e, int64_t tile_n)
      : a_(a.in.at(0)), b_(a.in.at(1)), y_(a.out.at(0)), k_(k), n_(n), col_maj_(col_maj), epilogue_(e),
        tile_n_(std::max<int64_t>(1, tile_n)) {
    if (!col_maj_ && info(b_.dtype).quantised)
      value_error("a quantised GEMM weight is (N, K), as a Linear stores it: use b_col_maj");
    // Per-thread f32 rows (a row of a, a tile of b, a row of y), made once here, not per call.
    per_thread_ = k_ + k_ * tile_n_ + 2 * n_;
    work_.assign(size_t(per_thread_ * cpu::ThreadPool::shared(1).size()), 0.0f);
  }

  void run(const int64_t* w, int thread, int threads) const override {
    const int64_t rows = a_.shape.size() < 2 ? 1 : a_.rows(w);
    auto [begin, end] = cpu::split(n_, thread, threads, tile_n_);
    if (begin >= end) return;
    float* a_row = work_.data() + thread * per_thread_;
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
          const float* a = row_of_a(w, m, a_row);
          for (int64_t j = 0; j < nt; ++j) {
            float v = float(finish(epilogue_, dot(a, b + j * k_, k_)));
            store_row(y_, w, m * n_ + n0 + j, &v, 1);
          }
        }
      }
      return;
    }
    // b (K, N): accumulate rows of b scaled by a's entries, over this thread's columns.
    const int64_t width = end - begin;
    for (int64_t m = 0; m < rows; ++m) {
      const float* a = row_of_a(w, m, a_row);
      std::fill(y_row, y_row + width, 0.0f);
      for (int64_t kk = 0; kk < k_; ++kk) {
        load_row(b_, w, kk * n_ + begin, b_row, width);
        float s = a[kk];
        for (int64_t j = 0; j < width; ++j) y_row[j] += s * b_row[j];
      }
      for (int64_t j = 0; j < width; ++j) y_row[j] = float(finish(epilogue_, y_row[j]));
      store_row(y_, w, m * n_ + begin, y_row, width);
    }
  }

 private:
  const float* row_of_a(const int64_t* w, int64_t m, float* buffer) const {
    if (a_.dtype == f32) return a_.data<float>(w) + m * k_;
    load_row(a_, w, m * k_, buffer, k_);
    return buffer;
  }

  cpu::Operand a_, b_, y_;
  int64_t k_, n_;
  bool col_maj_;
  Epilogue epilogue_;
  int64_t tile_n_;
  int64_t per_thread_;
  mutable std::vector<float> work_;
};

class Matmul : public Operator {
 public:
  Matmul(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {
    k_ = params_.integer("K");
    n_ = params_.integer("N");
    col_maj_ = params_.contains("b_col_maj") ? params_.flag("b_col_maj") : true;
    epilogue_ = params_.contains("epilogue") ? epilogue_from(params_.text("epilogue")) : Epilogue::none;
    if (params_.contains("precision")) precision_from_name(params_.text("precision"));
    if (k_ <= 0 || n_ <= 0) value_error(d.name + ": K and N are positive, got " + params_.str());
  }

  void reference(const RefCall& c) const override {
    const RefOperand &a = c.in[0], &b = c.in[1], &y = c.out[0];
    const int64_t rows = a.shape.size() < 2 ? 1 : valid_rows(a);
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < n_; ++n) {
        double s = 0;
        for (int64_t k = 0; k < k_; ++k)
          s += double(a.data[m * k_ + k]) * double(col_maj_ ? b.data[n * k_ + k] : b.data[k * n_ + n]);
        y.data[m * n_ + n] = round_to(y.dtype, float(finish(epilogue_, s)));
      }
  }

  Tolerance tolerance(Precision p) const override {
    double k = double(k_);
    switch (p) {
      case Precision::highest:
      case Precision::high:
        return {2e-6 * k, 2e-5};
      case Precision::medium:
        return {4e-3 * std::sqrt(k), 1e-2};
    }
    return {};
  }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const override {
    return std::make_unique<MatmulKernel>(a, k_, n_, col_maj_, epilogue_, tunables_.integer("tile_n"));
  }

 protected:
  int64_t k_, n_;
  bool col_maj_;
  Epilogue epilogue_;
};

struct GEMM : Matmul {
  GEMM(Fields p, Fields t) : Matmul(kGEMM, std::move(p), std::move(t)) {}
};
struct ProjectionGEMM : Matmul {
  ProjectionGEMM(Fields p, Fields t) : Matmul(kProjectionGEMM, std::move(p), std::move(t)) {}
};
struct GEMV : Matmul {
  GEMV(Fields p, Fields t) : Matmul(kGEMV, std::move(p), std::move(t)) {}
  // One row always rounds once from f32 sums, whatever the precision asked.
  Tolerance tolerance(Precision) const override { return Matmul::tolerance(Precision::highest); }
};

}  // namespace

std::vector<CatalogEntry> matmul_entries() {
  return {entry<GEMM>(kGEMM), entry<ProjectionGEMM>(kProjectionGEMM), entry<GEMV>(kGEMV)};
}

}  // namespace iron::ops
