// Sample: the next token from a row of logits, as a one-element i32. Greedy (the highest logit,
// the lowest id on a tie) at temperature 0; otherwise the top_k most likely, cut to the smallest
// set whose probability reaches top_p, softmax at `temperature`, and one draw from a counter-based
// generator (sample.hpp) keyed by the `seed` param and the per-call counter and position: the
// same seed gives the same tokens. Greedy never reads the seed. With a second operand (one i32
// row of settings words, sample.hpp), the temperature, top_k, top_p and seed are read from it each
// call instead of the params, so one compiled version serves any settings (a server's requests).
//
// With `rows` B > 1, or four operands, it draws a batch: logits (B, N), settings (B, words), and
// per-row `steps` and `positions` (B,) i32 (graph inputs) in place of the scalars; row b draws
// with its own settings, keyed by its own step and position, exactly as one row alone draws, into
// y (B,) i32. Rows are split among threads, each row drawn on one.
#include <limits>
#include <numeric>

#include "ops/op.hpp"
#include "ops/sample/sample.hpp"

namespace iron::ops {

namespace {
const Declaration kSample{"Sample",
                          nullptr,
                          {{"N", std::nullopt},
                           {"temperature", 0.0},
                           {"top_k", int64_t(0)},
                           {"top_p", 1.0},
                           {"seed", int64_t(0)},  // the 64-bit seed's bits
                           {"rows", int64_t(1)}},
                          {}};

// The first index of the largest non-NaN value (0 when every value is NaN). Two passes: the
// largest value by eight running maxima (no loop-carried index, so the compiler vectorises it; a
// decode step runs this on one thread over the whole vocabulary), then its first index.
inline int32_t argmax(const float* x, int64_t n) {
  const float lowest = -std::numeric_limits<float>::infinity();
  float part[8] = {lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] = x[i + j] > part[j] ? x[i + j] : part[j];  // NaN never wins
  for (; i < n; ++i) part[0] = x[i] > part[0] ? x[i] : part[0];
  float best = lowest;
  for (float p : part) best = p > best ? p : best;
  for (i = 0; i < n; ++i)
    if (x[i] == best) return int32_t(i);
  return 0;  // every value NaN
}

struct Settings {
  int64_t n, top_k;
  double temperature, top_p;
  uint64_t seed;
};

// The sampled id; `order` and `probability` are scratch of n entries each.
inline int32_t sample(const Settings& s, const float* x, int64_t counter, int64_t position, int32_t* order,
                      double* probability) {
  if (s.temperature <= 0) return argmax(x, s.n);
  std::iota(order, order + s.n, 0);
  int64_t k = (s.top_k > 0 && s.top_k < s.n) ? s.top_k : s.n;
  auto larger = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::partial_sort(order, order + k, order + s.n, larger);
  double top = double(x[order[0]]), sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += probability[i] = std::exp((double(x[order[i]]) - top) / s.temperature);
  // The smallest prefix whose probability reaches top_p (at least one token).
  int64_t keep = 0;
  double mass = 0;
  while (keep < k) {
    mass += probability[keep++] / sum;
    if (mass >= s.top_p) break;
  }
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i) kept += probability[i];
  double u = sample_uniform(s.seed, counter, position) * kept;
  for (int64_t i = 0; i < keep; ++i) {
    u -= probability[i];
    if (u < 0) return order[i];
  }
  return order[keep - 1];
}

void with_settings(Settings& s, const Sampling& given) {
  s.temperature = given.temperature;
  s.top_k = given.top_k;
  s.top_p = given.top_p;
  s.seed = given.seed;
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const cpu::KernelArgs& a, const Settings& s, int64_t rows)
      : x_(a.in.at(0)), y_(a.out.at(0)), scalars_(a.scalars), s_(s), per_call_(a.in.size() > 1), rows_(rows) {
    if (per_call_) settings_ = a.in.at(1);
    if (a.in.size() > 2) {
      steps_ = a.in.at(2);
      positions_ = a.in.at(3);
      for (const cpu::Operand* o : {&steps_, &positions_})
        if (o->dtype != i32 || o->rank() != 1 || o->shape[0] != rows_)
          value_error("Sample: per-row steps and positions are (" + std::to_string(rows_) + ",) i32, got " +
                      to_string(o->shape) + " " + std::string(name(o->dtype)));
      if (settings_.rank() != 2 || settings_.shape[0] != rows_ || settings_.shape[1] != kSettingsWords ||
          element_count(x_.shape) != rows_ * s_.n)
        value_error("Sample: a batch of " + std::to_string(rows_) + " rows takes logits (rows, " +
                    std::to_string(s_.n) + ") and settings (rows, " + std::to_string(kSettingsWords) + "), got " +
                    to_string(x_.shape) + " and " + to_string(settings_.shape));
    }
    // Per thread: probabilities (doubles first, for alignment), ids, values.
    scratch_ = cpu::Scratch(size_t(s.n) * 4);
  }
  bool parallel() const override { return rows_ > 1; }
  int64_t multiply_adds() const override { return rows_ * s_.n * 4; }
  void run(const int64_t* w, int thread, int threads) const override {
    auto [begin, end] = cpu::split(rows_, thread, threads);
    for (int64_t r = begin; r < end; ++r) draw(w, thread, r);
  }

 private:
  void draw(const int64_t* w, int thread, int64_t r) const {
    float* base = scratch_.get(thread);
    auto* probability = reinterpret_cast<double*>(base);
    auto* order = reinterpret_cast<int32_t*>(base + 2 * s_.n);
    float* values = base + 3 * s_.n;
    const float* x = x_.dtype == f32 ? x_.data<float>(w) + r * s_.n : values;
    if (x_.dtype != f32) load_row(x_, w, r * s_.n, values, s_.n);
    const bool per_row = steps_.base != nullptr;
    int64_t counter = per_row ? steps_.data<int32_t>(w)[r] : scalars_.size() > 0 ? scalars_[0].get(w) : 0;
    int64_t position = per_row ? positions_.data<int32_t>(w)[r] : scalars_.size() > 1 ? scalars_[1].get(w) : 0;
    Settings s = s_;
    if (per_call_) with_settings(s, decode_settings(settings_.data<int32_t>(w) + r * kSettingsWords));
    y_.data<int32_t>(w)[r] = sample(s, x, counter, position, order, probability);
  }

  cpu::Operand x_, y_, settings_, steps_, positions_;
  std::vector<cpu::WordRef> scalars_;
  Settings s_;
  bool per_call_;
  int64_t rows_;
  cpu::Scratch scratch_;
};

struct Sample : Operator {
  Sample(Fields p, Fields t) : Operator(kSample, std::move(p), std::move(t)) {
    s_ = {params_.integer("N"), params_.integer("top_k"), params_.number("temperature"), params_.number("top_p"),
          uint64_t(params_.integer("seed"))};
    if (s_.n <= 0) value_error("Sample N is positive, got " + std::to_string(s_.n));
    if (!(s_.temperature >= 0)) value_error("Sample temperature is at least 0, got " + std::to_string(s_.temperature));
    if (!(s_.top_p > 0 && s_.top_p <= 1)) value_error("Sample top_p is in (0, 1], got " + std::to_string(s_.top_p));
    rows_ = params_.integer("rows");
    if (rows_ <= 0) value_error("Sample rows is positive, got " + std::to_string(rows_));
  }
  void reference(const RefCall& c) const override {
    std::vector<int32_t> order(size_t(s_.n));
    std::vector<double> probability(size_t(s_.n));
    const bool per_row = c.in.size() > 3;
    for (int64_t r = 0; r < rows_; ++r) {
      int64_t counter = c.scalars.size() > 0 ? c.scalars[0] : 0, position = c.scalars.size() > 1 ? c.scalars[1] : 0;
      if (per_row) {
        counter = int64_t(c.in[2].data[r]);
        position = int64_t(c.in[3].data[r]);
      }
      Settings s = s_;
      if (c.in.size() > 1) {
        if (element_count(c.in[1].shape) < rows_ * kSettingsWords)
          value_error("Sample settings hold " + std::to_string(kSettingsWords) + " words a row");
        with_settings(s, decode_settings(c.in[1].data + r * kSettingsWords));
      }
      c.out[0].data[r] = float(sample(s, c.in[0].data + r * s_.n, counter, position, order.data(), probability.data()));
    }
  }
  Tolerance tolerance(Precision) const override { return {0, 0}; }
  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(a, s_, rows_);
  }
  Settings s_;
  int64_t rows_ = 1;
};
}  // namespace

// Records its dispatches on Vulkan (sample_vulkan.cpp).
void record_sample(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

OpEntry sample_entry() { return entry<Sample>(kSample, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_sample)); }

}  // namespace iron::ops
