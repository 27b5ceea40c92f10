// GEMM: y (M, N) = a (M, K) @ b, with b (K, N), or (N, K) when b_col_maj (a weight as
// torch.nn.Linear stores it). GEMV: one row, always rounded once from f32 sums. ProjectionGEMM:
// a GEMM with an epilogue applied before the one rounding. Rows of `a` may be bounded per call.
#include "ops/gemm/gemm.hpp"

#include "ops/elementwise/elementwise.hpp"
#include "ops/gemm/kernels.hpp"
#include "ops/op.hpp"
#include "ops/rms_norm/rms_norm.hpp"

namespace iron::ops {

namespace gemm {

RowsOfA::RowsOfA(const cpu::KernelArgs& a, const MatmulConfig& c)
    : a_(a.in.at(0)),
      k_(c.k),
      norm_(c.norm),
      epsilon_(c.norm_epsilon),
      in_place_(a_.dtype == f32 && !c.norm),
      features_(a.features ? *a.features : cpu::Features::host()) {
  if (norm_ && c.norm_weighted) {
    // The norm's weight is resident and never changes while this kernel lives: converted once.
    const cpu::Operand& g = a.in.back();
    weight_.resize(size_t(k_));
    to_f32(g.dtype, g.address(nullptr), weight_.data(), k_);
  }
}

const float* RowsOfA::row(const int64_t* w, int64_t m, float* buffer) const {
  if (in_place_) return a_.data<float>(w) + m * k_;
  load_row(a_, w, m * k_, buffer, k_);
  if (norm_) rms_norm_row(buffer, weight_.empty() ? nullptr : weight_.data(), buffer, k_, epsilon_, features_);
  return buffer;
}

}  // namespace gemm

namespace {

using gemm::Epilogue;
using gemm::finish;

// Params every matmul has that only the planner sets (graph/fold.cpp): an RMSNorm folded into
// a's rows (its weight the last input), a bias row per weight added to the f32 sums before the
// epilogue (inputs after the residual, one per weight), and several weights over one `a`
// (inputs 1..parts, outputs 0..parts-1; "N" their rows together), two of them finished by
// silu(y0) * y1 or gelu_tanh(y0) * y1 into a third output ("then": "silu_mul" or
// "gelu_tanh_mul"). Inputs in order: a, the weights, the residual, the biases, the norm's weight.
std::vector<FieldDecl> with_planner_params(std::vector<FieldDecl> own) {
  for (FieldDecl f : std::initializer_list<FieldDecl>{{"norm", false},
                                                      {"norm_weighted", false},
                                                      {"norm_epsilon", 1e-6},
                                                      {"bias", false},
                                                      {"parts", int64_t(1)},
                                                      {"then", std::string("none")}})
    own.push_back(std::move(f));
  return own;
}

const std::vector<FieldDecl> kTileN{{"tile_n", int64_t(16), {int64_t(8), int64_t(16), int64_t(32)}}};
const Declaration kGEMM{"GEMM",
                        nullptr,
                        with_planner_params({{"M", std::nullopt},
                                             {"K", std::nullopt},
                                             {"N", std::nullopt},
                                             {"b_col_maj", false},
                                             {"precision", std::string("highest")},
                                             {"residual", false}}),
                        kTileN};
const Declaration kProjectionGEMM{"ProjectionGEMM",
                                  &kGEMM,
                                  with_planner_params({{"M", std::nullopt},
                                                       {"K", std::nullopt},
                                                       {"N", std::nullopt},
                                                       {"b_col_maj", false},
                                                       {"precision", std::string("high")},
                                                       {"epilogue", std::string("none")},
                                                       {"residual", false}}),
                                  kTileN};
const Declaration kGEMV{"GEMV",
                        nullptr,
                        with_planner_params({{"K", std::nullopt}, {"N", std::nullopt}, {"residual", false}}),
                        kTileN};

Epilogue epilogue_from(const std::string& e) {
  if (e == "none") return Epilogue::none;
  if (e == "relu") return Epilogue::relu;
  if (e == "silu") return Epilogue::silu;
  if (e == "gelu") return Epilogue::gelu;
  if (e == "gelu_tanh") return Epilogue::gelu_tanh;
  value_error("ProjectionGEMM epilogue is none, relu, silu, gelu or gelu_tanh, not '" + e + "'");
}

class Matmul : public Operator {
 public:
  Matmul(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {
    k_ = params_.integer("K");
    n_ = params_.integer("N");
    col_maj_ = params_.contains("b_col_maj") ? params_.flag("b_col_maj") : true;
    epilogue_ =
        params_.contains("epilogue") ? epilogue_from(params_.text("epilogue")) : Epilogue::none;
    if (params_.contains("precision")) precision_from_name(params_.text("precision"));
    residual_ = params_.flag("residual");
    bias_ = params_.flag("bias");
    norm_ = params_.flag("norm");
    norm_weighted_ = params_.flag("norm_weighted");
    norm_epsilon_ = params_.number("norm_epsilon");
    if (norm_ && !(norm_epsilon_ >= 0)) value_error(d.name + ": norm_epsilon is at least 0, got " + params_.str());
    parts_ = params_.integer("parts");
    gate_ = gate_from(params_.text("then"), d.name);
    if (parts_ < 1 || (parts_ > 1 && (residual_ || !col_maj_)) || (gate_ != Gate::none && parts_ != 2))
      value_error(d.name + ": parts is 1, or more over (N, K) weights without a residual, and a gate takes 2; got " +
                  params_.str());
    if (k_ <= 0 || n_ <= 0) value_error(d.name + ": K and N are positive, got " + params_.str());
  }

  void reference(const RefCall& c) const override {
    const int64_t rows = c.in[0].shape.size() < 2 ? 1 : valid_rows(c.in[0]);
    // A folded RMSNorm: a's rows normalised as the RMSNorm operator would have written them.
    std::vector<float> normed;
    const float* a = c.in[0].data;
    if (norm_) {
      normed.assign(a, a + rows * k_);
      const float* g = norm_weighted_ ? c.in.back().data : nullptr;
      for (int64_t m = 0; m < rows; ++m)
        rms_norm_row(&normed[size_t(m * k_)], g, &normed[size_t(m * k_)], k_, norm_epsilon_);
      a = normed.data();
    }
    for (int64_t part = 0; part < parts_; ++part) {
      const RefOperand &b = c.in[size_t(1 + part)], &y = c.out[size_t(part)];
      const int64_t width = parts_ == 1 ? n_ : b.shape[0];
      for (int64_t m = 0; m < rows; ++m)
        for (int64_t n = 0; n < width; ++n) {
          double s = 0;
          for (int64_t k = 0; k < k_; ++k)
            s += double(a[m * k_ + k]) * double(col_maj_ ? b.data[n * k_ + k] : b.data[k * width + n]);
          if (bias_) s += double(c.in.at(size_t(1 + parts_ + (residual_ ? 1 : 0) + part)).data[n]);
          double r = residual_ ? double(c.in.at(2).data[m * width + n]) : 0.0;
          y.data[m * width + n] = round_to(y.dtype, float(finish(epilogue_, s) + r));
        }
    }
    if (gate_ != Gate::none) {
      // As the SwiGLU or GeGLU step's reference.
      const RefOperand &gate = c.out[0], &up = c.out[1], &y = c.out[2];
      for (int64_t i = 0; i < rows * row_elements(y.shape); ++i)
        y.data[i] = round_to(y.dtype, gated(gate_, gate.data[i], up.data[i]));
    }
  }

  Tolerance tolerance(Precision p) const override {
    double k = double(k_);
    switch (p) {
      case Precision::highest:
      case Precision::high:
        return {2e-6 * k, 2e-5};
      case Precision::medium:
        // Covers bf16 inputs and int8 blocks of x (scale max|x| / 127): for |w| < 0.3 and x of
        // unit scale the int8 path's worst error is about a quarter (x ~ U(-1, 1)) to a half
        // (x ~ N(0, 1)) of this (gemm_int8_test), so it stays as it was.
        return {4e-3 * std::sqrt(k), 1e-2};
    }
    return {};
  }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    if (parts_ == 1) return part_kernel(a, n_);
    // A kernel per weight, each over a, its weight (and the norm's weight) into its output.
    std::vector<std::unique_ptr<gemm::RowRangeKernel>> parts;
    for (int64_t part = 0; part < parts_; ++part) {
      cpu::KernelArgs one = a;
      one.in = {a.in.at(0), a.in.at(size_t(1 + part))};
      if (bias_) one.in.push_back(a.in.at(size_t(1 + parts_ + part)));
      if (norm_weighted_) one.in.push_back(a.in.back());
      one.out = {a.out.at(size_t(part))};
      parts.push_back(part_kernel(one, one.in[1].shape.at(0)));
    }
    return gemm::parts_kernel(std::move(parts), a, gate_);
  }

 private:
  // The kernel of one weight (N rows) over a.
  std::unique_ptr<gemm::RowRangeKernel> part_kernel(const cpu::KernelArgs& a, int64_t n) const {
    gemm::MatmulConfig c{k_,    n,         col_maj_, epilogue_, tunables_.integer("tile_n"),
                         gemv_, residual_, bias_,    norm_,     norm_weighted_,
                         norm_epsilon_};
    // The fast kernels take a weight (N, K) of a float or block kind and float activations
    // (refuses_fast); everything else, and a processor without AVX2/FMA/F16C or NEON, takes the
    // portable loops.
    if (const FastPath p = fast_path(a); p.isa)
      return gemm::fast_kernel(a, c, *p.isa, p.m);
    return gemm::portable_kernel(a, c);
  }

  // What the fast kernel does with a step: its loops (null: the portable kernel takes it) and, at
  // medium, whether x goes to int8 blocks or bf16, and whether in AMX tiles.
  struct FastPath {
    const gemm::Isa* isa = nullptr;
    gemm::MediumProducts m;
  };
  FastPath fast_path(const cpu::KernelArgs& a) const {
    FastPath p;
    const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
    p.isa = gemm::select_isa(f);
    if (!p.isa || !refusal(*this, a).empty()) return {};
    const bool medium = a.precision == Precision::medium && !gemv_;
    // ProjectionGEMM at medium may round x to int8 blocks (the AVX-512 loops with VNNI, the AVX2
    // ones with vpmaddubsw or AVX-VNNI, NEON's with sdot), where its weight has an int8 layout
    // (packed_int8 decides).
    const bool avx512 = std::string_view(p.isa->name) == "avx512";
    const DType w = a.in.at(1).dtype;
    gemm::MediumProducts& m = p.m;
    m.int8 = medium && projection_ && (f.avx512vnni || !avx512) && p.isa->gemm_int8 && a.in.at(0).dtype == f32 &&
             gemm::int8_weight(w);
    // bf16 products only where they multiply more pairs than f32 FMAs: AMD's vdpbf16ps, or AMX's
    // tiles (which take k in steps of 32). Elsewhere a float weight's rows are read as bf16 pairs
    // and widened to f32 in registers: W alone rounded, in half the bytes (docs/design.md).
    m.bf16 = medium && f.avx512bf16 && p.isa->tile_bf16 && (f.bf16_pairs_fast || (f.amx_bf16 && k_ % 32 == 0));
    m.amx_bf16 = m.bf16 && f.amx_bf16 && p.isa->tile_bf16_amx;
    m.amx_int8 = m.int8 && f.amx_int8 && p.isa->gemm_int8_amx;
    m.w16 = medium && !m.bf16 && !m.int8 && p.isa->tile_w16 && !info(w).quantised && k_ % 2 == 0;
    return p;
  }

 public:
  /// Why the vector loops do not take this step (a weight or activation they have no loop for),
  /// empty when they do: what part_kernel() asks before taking them.
  static std::string refuses_fast(const Operator& op, const cpu::KernelArgs& a) {
    const gemm::Isa* isa = gemm::select_isa(a.features ? *a.features : cpu::Features::host());
    return isa ? refusal(static_cast<const Matmul&>(op), a) : "no vector loops on this processor";
  }
  /// refuses_fast where an instruction set's loops run (each takes the same steps).
  static std::string refusal(const Matmul& m, const cpu::KernelArgs& a) {
    auto plain_float = [](DType t) { return t == f32 || t == bf16 || t == f16; };
    const DType x = a.in.at(0).dtype, w = a.in.at(1).dtype, y = a.out.at(0).dtype;
    if (!m.col_maj_) return "a weight of (K, N) rather than (N, K)";
    if (!gemm::fast_weight(w)) return "a " + std::string(iron::name(w)) + " weight";
    if (!plain_float(x) || !plain_float(y))
      return "a " + std::string(iron::name(plain_float(x) ? y : x)) + (plain_float(x) ? " output" : " input");
    if (m.k_ % info(w).block != 0)
      return "K of " + std::to_string(m.k_) + ", not whole blocks of " + std::to_string(info(w).block);
    return "";
  }
  /// How the fast kernel takes a step (`iron info --kernels`): its products' inputs and
  /// instructions, as part_kernel() decides them.
  static std::string describe_fast(const Operator& op, const cpu::KernelArgs& a) {
    const FastPath p = static_cast<const Matmul&>(op).fast_path(a);
    if (!p.isa) {  // an ARM target's step the NEON loops refuse: the portable loops take it
      const std::string why = refuses_fast(op, a);
      return why.empty() ? "" : "(the portable loops: " + why + ")";
    }
    if (p.m.amx_int8) return "(int8 x: AMX-INT8 tiles, vpdpbusd for a few rows)";
    if (p.m.int8) return std::string("(int8 x: ") + p.isa->int8_instructions + ")";
    if (p.m.amx_bf16) return "(bf16 x: AMX-BF16 tiles)";
    if (p.m.bf16) return "(bf16 x: vdpbf16ps)";
    const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
    if (p.m.w16)
      return f.avx512bf16 ? "(f32 FMA, W read as bf16: vdpbf16ps multiplies no more pairs here)"
                          : "(f32 FMA, W read as bf16)";
    return "(f32 FMA)";
  }
  /// Why AMX tiles do not take this step, empty when they do (as part_kernel() decides).
  static std::string refuses_amx(const Operator& op, const cpu::KernelArgs& a) {
    const Matmul& m = static_cast<const Matmul&>(op);
    if (std::string why = refuses_fast(op, a); !why.empty()) return why;
    if (m.gemv_) return "one row (GEMV) rounds once from f32 sums";
    if (a.precision != Precision::medium) return "tiles round to bf16 or int8: medium only";
    const cpu::Features& f = *a.features;
    const bool int8 = m.projection_ && f.avx512vnni && f.amx_int8 && a.in.at(0).dtype == f32;
    const bool bf16 = f.avx512bf16 && f.amx_bf16;
    if (!int8 && !bf16) return f.amx_int8 ? "int8 tiles take a ProjectionGEMM of f32 rows only" : "needs amx-bf16";
    return "";
  }

 protected:
  int64_t k_, n_;
  bool col_maj_;
  Epilogue epilogue_;
  bool gemv_ = false;
  bool projection_ = false;  // ProjectionGEMM: medium may take int8 activations
  bool residual_ = false;    // y = epilogue(a @ b) + r, r a third input of y's shape
  bool bias_ = false;        // y = epilogue(a @ b + bias) ..., a bias row of N per weight
  // a's rows through an RMSNorm first (folded in by the planner), its weight the last input
  bool norm_ = false, norm_weighted_ = false;
  double norm_epsilon_ = 0;
  int64_t parts_ = 1;      // weights over the same a
  Gate gate_ = Gate::none;  // a third output, silu(y0) * y1 or gelu_tanh(y0) * y1
};

struct GEMM : Matmul {
  GEMM(Fields p, Fields t) : Matmul(kGEMM, std::move(p), std::move(t)) {}
};
struct ProjectionGEMM : Matmul {
  ProjectionGEMM(Fields p, Fields t) : Matmul(kProjectionGEMM, std::move(p), std::move(t)) {
    projection_ = true;
  }
};
struct GEMV : Matmul {
  GEMV(Fields p, Fields t) : Matmul(kGEMV, std::move(p), std::move(t)) { gemv_ = true; }
  // One row always rounds once from f32 sums, whatever the precision asked.
  Tolerance tolerance(Precision) const override { return Matmul::tolerance(Precision::highest); }
};

}  // namespace

// Records its dispatches on Vulkan (gemm_vulkan.cpp).
void record_matmul(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

std::vector<OpEntry> matmul_entries() {
  const std::vector<CpuTarget> targets = {{cpu::Target::amx, &Matmul::refuses_amx, &Matmul::describe_fast},
                                          {cpu::Target::avx512, &Matmul::refuses_fast, &Matmul::describe_fast},
                                          {cpu::Target::avx2, &Matmul::refuses_fast, &Matmul::describe_fast},
                                          // NEON's loops (on SVE processors too); a step they refuse
                                          // (K not whole blocks) takes the portable loops with the target's
                                          // features, so a GELU, SwiGLU or GeGLU merged into it runs the
                                          // vector loop (and gives the bits) the operator alone takes.
                                          {cpu::Target::sve, nullptr, &Matmul::describe_fast},
                                          {cpu::Target::neon, nullptr, &Matmul::describe_fast},
                                          {cpu::Target::portable}};
  const vulkan::KernelRecorder vulkan = IRON_VULKAN_RECORDER(record_matmul);
  return {entry<GEMM>(kGEMM, targets, vulkan), entry<ProjectionGEMM>(kProjectionGEMM, targets, vulkan),
          entry<GEMV>(kGEMV, targets, vulkan)};
}

}  // namespace iron::ops
