// Add, Sub, Mul, Div, and the gated feed-forwards' SwiGLU (silu(a) * b) and GeGLU (gelu_tanh(a) *
// b): elementwise on two operands of one shape, or the second a row broadcast to every row of the
// first. Computed in f32, rounded once to the output's dtype.
#include "ops/elementwise/elementwise.hpp"

#include <algorithm>

#include "ops/gelu/gelu.hpp"
#include "ops/op.hpp"

namespace iron::ops {

// In vector lanes where `f` runs a Highway copy (swiglu_hwy.cpp); false: not here.
bool silu_mul_vector(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f);

namespace {

const Declaration kElementwise{"Elementwise", nullptr, {{"elements", int64_t(0)}, {"broadcast_row", false}}, {}};
const Declaration kAdd{"Add", &kElementwise, kElementwise.params, {}};
const Declaration kSub{"Sub", &kElementwise, kElementwise.params, {}};
const Declaration kMul{"Mul", &kElementwise, kElementwise.params, {}};
const Declaration kDiv{"Div", &kElementwise, kElementwise.params, {}};
const Declaration kSwiGLU{"SwiGLU", &kElementwise, kElementwise.params, {}};
// gelu_tanh(a) * b: Gemma's gated feed-forward (GELU's tanh form where Llama's has SiLU).
const Declaration kGeGLU{"GeGLU", &kElementwise, kElementwise.params, {}};

enum class Kind { add, sub, mul, div, silu_mul, gelu_tanh_mul };

template <Kind K>
inline float apply(float a, float b) {
  if constexpr (K == Kind::add) return a + b;
  if constexpr (K == Kind::sub) return a - b;
  if constexpr (K == Kind::mul) return a * b;
  if constexpr (K == Kind::silu_mul) return silu_mul(a, b);
  if constexpr (K == Kind::gelu_tanh_mul) return gelu_tanh_mul(a, b);
  return a / b;
}

// The elements a call covers: valid rows of the first operand times its row.
int64_t covered(const Shape& shape, int64_t rows) { return shape.empty() ? 1 : rows * row_elements(shape); }

template <Kind K>
class Kernel final : public cpu::Kernel {
 public:
  explicit Kernel(const cpu::KernelArgs& a)
      : a_(a.in.at(0)), b_(a.in.at(1)), y_(a.out.at(0)), features_(a.features ? *a.features : cpu::Features::host()) {
    width_ = b_.shape.empty() ? 1 : element_count(b_.shape);
    broadcast_ = element_count(b_.shape) != element_count(a_.shape);
  }
  void run(const int64_t* w, int thread, int threads) const override {
    int64_t n = covered(y_.shape, y_.rows(w));
    auto [begin, end] = cpu::split(n, thread, threads, 64);
    if (a_.dtype == f32 && b_.dtype == f32 && y_.dtype == f32) {
      const float* a = a_.data<float>(w);
      const float* b = b_.data<float>(w);
      float* y = y_.data<float>(w);
      if (K == Kind::silu_mul && !broadcast_) {
        silu_mul_f32(a + begin, b + begin, y + begin, end - begin, features_);
        return;
      }
      if (K == Kind::gelu_tanh_mul && !broadcast_) {
        gelu_tanh_mul_f32(a + begin, b + begin, y + begin, end - begin, features_);
        return;
      }
      if (!broadcast_) {
        for (int64_t i = begin; i < end; ++i) y[i] = apply<K>(a[i], b[i]);
      } else {
        // Row by row (a division per element was most of a bias Add's time).
        for (int64_t i = begin; i < end;) {
          const int64_t j = i % width_, run = std::min(end - i, width_ - j);
          const float* bj = b + j - i;
          for (int64_t e = i; e < i + run; ++e) y[e] = apply<K>(a[e], bj[e]);
          i += run;
        }
      }
      return;
    }
    float av[256], bv[256], yv[256];
    for (int64_t i = begin; i < end; i += 256) {
      int64_t m = std::min<int64_t>(256, end - i);
      load_row(a_, w, i, av, m);
      for (int64_t k = 0; k < m; ++k) {
        int64_t j = broadcast_ ? (i + k) % width_ : i + k;
        load_row(b_, w, j, bv + k, 1);
      }
      for (int64_t k = 0; k < m; ++k) yv[k] = apply<K>(av[k], bv[k]);
      store_row(y_, w, i, yv, m);
    }
  }

 private:
  cpu::Operand a_, b_, y_;
  int64_t width_ = 1;
  bool broadcast_ = false;
  cpu::Features features_;  // what SwiGLU's f32 loop may use
};

template <Kind K>
class Op : public Operator {
 public:
  Op(const Declaration& d, Fields p, Fields t) : Operator(d, std::move(p), std::move(t)) {}
  void reference(const RefCall& c) const override {
    const RefOperand &a = c.in[0], &b = c.in[1], &y = c.out[0];
    int64_t n = covered(y.shape, valid_rows(y));
    int64_t width = element_count(b.shape);
    bool broadcast = width != element_count(a.shape);
    for (int64_t i = 0; i < n; ++i)
      y.data[i] = round_to(y.dtype, apply<K>(a.data[i], b.data[broadcast ? i % width : i]));
  }
  // The vector e^x of SwiGLU and of GELU's tanh form (GeGLU: GELU's own tolerance) against the
  // reference's double.
  Tolerance tolerance(Precision) const override {
    return K == Kind::silu_mul || K == Kind::gelu_tanh_mul ? Tolerance{1e-6, 4e-6} : Tolerance{1e-6, 1e-6};
  }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel<K>>(a);
  }
};

// Each operator: its kind of element function and its declaration.
template <Kind K, const Declaration& D>
struct Named : Op<K> {
  Named(Fields p, Fields t) : Op<K>(D, std::move(p), std::move(t)) {}
};
using Add = Named<Kind::add, kAdd>;
using Sub = Named<Kind::sub, kSub>;
using Mul = Named<Kind::mul, kMul>;
using Div = Named<Kind::div, kDiv>;
using SwiGLU = Named<Kind::silu_mul, kSwiGLU>;
using GeGLU = Named<Kind::gelu_tanh_mul, kGeGLU>;

}  // namespace

void silu_mul_f32(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f) {
  if (silu_mul_vector(a, b, y, n, f)) return;
  for (int64_t i = 0; i < n; ++i) y[i] = apply<Kind::silu_mul>(a[i], b[i]);
}

float gelu_tanh_mul(float a, float b) { return float(gelu_double(a, /*tanh=*/true)) * b; }

Gate gate_from(const std::string& name, const std::string& what) {
  if (name == "none") return Gate::none;
  if (name == "silu_mul") return Gate::silu_mul;
  if (name == "gelu_tanh_mul") return Gate::gelu_tanh_mul;
  value_error(what + ": then is none, silu_mul or gelu_tanh_mul, not '" + name + "'");
}

void gated_f32(Gate g, const float* a, const float* b, float* y, int64_t n, const cpu::Features& f) {
  if (g == Gate::silu_mul) silu_mul_f32(a, b, y, n, f);
  if (g == Gate::gelu_tanh_mul) gelu_tanh_mul_f32(a, b, y, n, f);
}

float gated(Gate g, float a, float b) {
  return g == Gate::silu_mul ? silu_mul(a, b) : g == Gate::gelu_tanh_mul ? gelu_tanh_mul(a, b) : a;
}

void gelu_tanh_mul_f32(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f) {
  if (y != a) std::copy(a, a + n, y);
  gelu_rows(y, n, /*tanh=*/true, f);
  for (int64_t i = 0; i < n; ++i) y[i] *= b[i];
}

// Records its dispatches on Vulkan (elementwise_vulkan.cpp).
void record_elementwise(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

std::vector<OpEntry> elementwise_entries() {
  const std::vector<CpuTarget> portable = {{cpu::Target::portable}};
  const vulkan::KernelRecorder vulkan = IRON_VULKAN_RECORDER(record_elementwise);
  return {entry<Add>(kAdd, portable, vulkan), entry<Sub>(kSub, portable, vulkan),
          entry<Mul>(kMul, portable, vulkan), entry<Div>(kDiv, portable, vulkan),
          // silu(a) * b in vector lanes (silu_mul_f32, swiglu_hwy.cpp).
          entry<SwiGLU>(kSwiGLU, highway_targets(), vulkan),
          // gelu_tanh(a) in GELU's vector lanes (gelu_hwy.cpp), times b.
          entry<GeGLU>(kGeGLU, highway_targets(), vulkan)};
}

}  // namespace iron::ops
