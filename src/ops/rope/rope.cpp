// RoPE: each row of x (rows, [heads,] head_dim) turned by its row of the table, every head alike.
// Pairs are adjacent entries (2i, 2i+1: llama.cpp's "normal" mode, llama2.c) or the two halves
// (i, i + head_dim/2: Hugging Face's rotate_half). The table holds angles (rows, head_dim/2), or
// their cosines then sines (rows, head_dim), precomputed once so a call computes no sin/cos.
#include "ops/op.hpp"

namespace iron::ops {

namespace {
const Declaration kRoPE{"RoPE",
                        nullptr,
                        {{"head_dim", std::nullopt},
                         {"heads", int64_t(1)},
                         {"mode", std::string("adjacent")},
                         {"table", std::string("angles")}},
                        {}};

struct Layout {
  int64_t d, heads;
  bool halves, cos_sin;
  // The pair (a, b) turned by angle i.
  int64_t first(int64_t i) const { return halves ? i : 2 * i; }
  int64_t second(int64_t i) const { return halves ? i + d / 2 : 2 * i + 1; }
};

// Turns one row of `heads` heads by the table row `t` (angles, or cosines then sines).
inline void turn(const Layout& l, const float* x, const float* t, float* y) {
  const int64_t half = l.d / 2;
  for (int64_t h = 0; h < l.heads; ++h, x += l.d, y += l.d)
    for (int64_t i = 0; i < half; ++i) {
      float c, s;
      if (l.cos_sin) {
        c = t[i];
        s = t[half + i];
      } else {
        c = float(std::cos(double(t[i])));
        s = float(std::sin(double(t[i])));
      }
      float a = x[l.first(i)], b = x[l.second(i)];
      y[l.first(i)] = a * c - b * s;
      y[l.second(i)] = a * s + b * c;
    }
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const Layout& l, const cpu::KernelArgs& a) : l_(l), x_(a.in.at(0)), t_(a.in.at(1)), y_(a.out.at(0)) {
    width_ = l.cos_sin ? l.d : l.d / 2;
    scratch_ = cpu::Scratch(size_t(l.heads * l.d * 2 + width_));
  }
  void run(const int64_t* w, int thread, int threads) const override {
    // Threads split (row, head) pairs: a decode step's one row still keeps every thread busy.
    const int64_t rows = x_.shape.size() == 1 ? 1 : x_.rows(w);
    auto [begin, end] = cpu::split(rows * l_.heads, thread, threads);
    const int64_t row = l_.heads * l_.d;
    float* xr = scratch_.get(thread);
    float* yr = xr + row;
    float* tr = yr + row;
    for (int64_t item = begin; item < end;) {
      const int64_t r = item / l_.heads, h0 = item % l_.heads, h1 = std::min(l_.heads, h0 + (end - item));
      Layout part = l_;
      part.heads = h1 - h0;
      const int64_t at = r * row + h0 * l_.d, n = part.heads * l_.d;
      load_row(x_, w, at, xr, n);
      load_row(t_, w, r * width_, tr, width_);
      turn(part, xr, tr, yr);
      store_row(y_, w, at, yr, n);
      item += part.heads;
    }
  }

 private:
  Layout l_;
  cpu::Operand x_, t_, y_;
  int64_t width_;
  cpu::Scratch scratch_;
};

struct RoPE : Operator {
  RoPE(Fields p, Fields t) : Operator(kRoPE, std::move(p), std::move(t)) {
    l_.d = params_.integer("head_dim");
    l_.heads = params_.integer("heads");
    const std::string& mode = params_.text("mode");
    const std::string& table = params_.text("table");
    if (mode != "adjacent" && mode != "halves")
      value_error("RoPE mode is 'adjacent' or 'halves', not '" + mode + "'");
    if (table != "angles" && table != "cos_sin")
      value_error("RoPE table is 'angles' or 'cos_sin', not '" + table + "'");
    if (l_.d <= 0 || l_.d % 2 || l_.heads <= 0)
      value_error("RoPE head_dim is even and positive, heads positive: " + params_.str());
    l_.halves = mode == "halves";
    l_.cos_sin = table == "cos_sin";
  }
  void reference(const RefCall& c) const override {
    const RefOperand &x = c.in[0], &t = c.in[1], &y = c.out[0];
    int64_t rows = x.shape.size() == 1 ? 1 : valid_rows(x);
    int64_t width = l_.cos_sin ? l_.d : l_.d / 2, row = l_.heads * l_.d;
    for (int64_t r = 0; r < rows; ++r) {
      turn(l_, x.data + r * row, t.data + r * width, y.data + r * row);
      round_all(y.dtype, y.data + r * row, row);
    }
  }
  Tolerance tolerance(Precision) const override { return {1e-6, 1e-5}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(l_, a);
  }
  Layout l_;
};
}  // namespace

// Records its dispatches on Vulkan (rope_vulkan.cpp).
void record_rope(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry rope_entry() { return entry<RoPE>(kRoPE, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_rope)); }

}  // namespace iron::ops
