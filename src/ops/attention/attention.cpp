// Attention: causal grouped-query attention of query rows over a KV cache, as Llama-family models
// use it. q (rows, heads, head_dim) over k_cache and v_cache (ctx, kv_heads, head_dim); query
// head h reads kv head h / (heads / kv_heads). Query row r of a call sits at absolute position
// start + r (start: the step's per-call scalar 0) and attends to cache positions [0, start + r],
// held to the cache's ctx rows (and its per-call bound on axis 0, if any). Rows of q may be bounded
// per call; rows past the bound are not written. `scale` 0 (the default) is 1/sqrt(head_dim).
#include <limits>

#include "iron/handle.hpp"
#include "ops/attention/rows.hpp"
#include "ops/op.hpp"

namespace iron::ops {

namespace {

const Declaration kAttention{"Attention",
                             nullptr,
                             {{"heads", std::nullopt},
                              {"kv_heads", std::nullopt},
                              {"head_dim", std::nullopt},
                              {"ctx", std::nullopt},
                              {"scale", 0.0}},
                             {{"block", int64_t(128), {int64_t(16), int64_t(32), int64_t(64), int64_t(128), int64_t(256)}}}};

struct Dims {
  int64_t heads, kv_heads, d, ctx;
  double scale;
  int64_t group() const { return heads / kv_heads; }
  /// The first element of key (or value) `j` of kv head `g` in a cache.
  int64_t at(int64_t j, int64_t g) const { return (j * kv_heads + g) * d; }
  /// Keys a query at absolute `position` attends to, given `cache_rows` valid cache rows.
  int64_t keys(int64_t position, int64_t cache_rows) const {
    return std::max<int64_t>(0, std::min({position + 1, ctx, cache_rows}));
  }
};

// f32 dot product with eight independent partial sums.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

void require_shape(const char* what, const cpu::Operand& o, const Shape& tail) {
  bool ok = o.rank() == 3 && o.shape[1] == tail[0] && o.shape[2] == tail[1] &&
            o.strides == contiguous_strides(o.shape);
  if (!ok)
    value_error(std::string("Attention: ") + what + " " + to_string(o.shape) +
                " is not a dense (rows, " + std::to_string(tail[0]) + ", " +
                std::to_string(tail[1]) + ")");
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const Dims& dims, const cpu::KernelArgs& a, int64_t block)
      : d_(dims),
        q_(a.in.at(0)),
        k_(a.in.at(1)),
        v_(a.in.at(2)),
        y_(a.out.at(0)),
        start_(a.scalars.at(0)),
        block_(std::max<int64_t>(1, block)) {
    require_shape("q", q_, {d_.heads, d_.d});
    require_shape("y", y_, {d_.heads, d_.d});
    require_shape("k_cache", k_, {d_.kv_heads, d_.d});
    require_shape("v_cache", v_, {d_.kv_heads, d_.d});
    if (k_.shape[0] != d_.ctx || v_.shape[0] != d_.ctx)
      value_error("Attention: caches of " + std::to_string(d_.ctx) + " rows, got " +
                  to_string(k_.shape) + " and " + to_string(v_.shape));
    // Per thread: the scaled query, the output accumulator, a key or value row, a block's scores.
    per_thread_ = 3 * d_.d + block_;
    scratch_ = cpu::Scratch(size_t(per_thread_));
    const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
    if (k_.dtype == f32 && v_.dtype == f32 && f.avx512f) fast_ = attention::avx512_row(d_.d);
  }

  // Each query row against every key of the cache and its value, at most.
  int64_t multiply_adds() const override { return q_.shape[0] * d_.heads * d_.ctx * d_.d * 2; }

  void run(const int64_t* w, int thread, int threads) const override {
    const int64_t rows = q_.rows(w), d = d_.d, heads = d_.heads;
    const int64_t start = start_.get(w);
    const int64_t cache_rows = std::min(k_.extent(0, w), v_.extent(0, w));
    const float scale = float(d_.scale);
    auto [begin, end] = balanced_split(rows, start, cache_rows, thread, threads);
    float* q = scratch_.get(thread);
    float* acc = q + d;
    float* row = acc + d;
    float* scores = row + d;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t r = p / heads, g = (p % heads) / d_.group();
      const int64_t keys = d_.keys(start + r, cache_rows);
      std::fill(acc, acc + d, 0.0f);
      if (keys == 0) {
        store_row(y_, w, p * d, acc, d);
        continue;
      }
      load_row(q_, w, p * d, q, d);
      for (int64_t i = 0; i < d; ++i) q[i] *= scale;
      if (fast_) {
        const int64_t stride = d_.kv_heads * d;
        fast_({q, k_.data<float>(w) + d_.at(0, g), v_.data<float>(w) + d_.at(0, g), stride, d, keys, block_, scores, acc});
        store_row(y_, w, p * d, acc, d);
        continue;
      }
      // Online softmax over blocks of keys: a running maximum m and sum l; acc holds the
      // weighted sum of values, all relative to exp(m).
      float m = -std::numeric_limits<float>::infinity(), l = 0;
      for (int64_t j0 = 0; j0 < keys; j0 += block_) {
        const int64_t n = std::min(block_, keys - j0);
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i) {
          scores[i] = dot(q, cache_row(k_, w, j0 + i, g, row), d);
          top = std::max(top, scores[i]);
        }
        const float next = std::max(m, top);
        const float shrink = std::exp(m - next);  // 0 on the first block
        l *= shrink;
        for (int64_t i = 0; i < d; ++i) acc[i] *= shrink;
        for (int64_t i = 0; i < n; ++i) {
          const float e = std::exp(scores[i] - next);
          l += e;
          const float* v = cache_row(v_, w, j0 + i, g, row);
          for (int64_t k = 0; k < d; ++k) acc[k] += e * v[k];
        }
        m = next;
      }
      const float inv = 1.0f / l;
      for (int64_t i = 0; i < d; ++i) acc[i] *= inv;
      store_row(y_, w, p * d, acc, d);
    }
  }

 private:
  // The (row, head) pairs thread `thread` takes: equal shares of the keys read, not of the rows.
  // A causal prefill's last rows read many more keys than its first (an even split of 512 rows
  // left one thread idle for 38% of the call).
  std::pair<int64_t, int64_t> balanced_split(int64_t rows, int64_t start, int64_t cache_rows, int thread,
                                             int threads) const {
    const int64_t pairs = rows * d_.heads;
    if (threads <= 1) return {0, pairs};
    // Each pair also pays a fixed cost (its query, its output) worth a few keys.
    auto cost = [&](int64_t p) { return d_.keys(start + p / d_.heads, cache_rows) + 8; };
    int64_t total = 0;
    for (int64_t r = 0; r < rows; ++r) total += cost(r * d_.heads) * d_.heads;
    const int64_t lo = total * thread / threads, hi = total * (thread + 1) / threads;
    int64_t begin = -1, end = pairs, before = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      if (begin < 0 && before >= lo) begin = p;
      if (before >= hi) {
        end = p;
        break;
      }
      before += cost(p);
    }
    if (begin < 0) begin = pairs;
    return {begin, std::max(begin, end)};
  }

  // Row j of kv head g of a cache as f32: in place for an f32 cache, else converted into `buffer`.
  const float* cache_row(const cpu::Operand& c, const int64_t* w, int64_t j, int64_t g,
                         float* buffer) const {
    if (c.dtype == f32) return c.data<float>(w) + d_.at(j, g);
    load_row(c, w, d_.at(j, g), buffer, d_.d);
    return buffer;
  }

  Dims d_;
  cpu::Operand q_, k_, v_, y_;
  cpu::WordRef start_;
  int64_t block_;
  int64_t per_thread_;
  cpu::Scratch scratch_;
  attention::RowFn fast_ = nullptr;  // the AVX-512 row loop, for f32 caches where the CPU has it
};

struct Attention : Operator {
  Attention(Fields p, Fields t) : Operator(kAttention, std::move(p), std::move(t)) {
    d_.heads = params_.integer("heads");
    d_.kv_heads = params_.integer("kv_heads");
    d_.d = params_.integer("head_dim");
    d_.ctx = params_.integer("ctx");
    d_.scale = params_.number("scale");
    if (d_.heads <= 0 || d_.kv_heads <= 0 || d_.d <= 0 || d_.ctx <= 0 || d_.heads % d_.kv_heads)
      value_error(
          "Attention: heads, kv_heads, head_dim and ctx are positive and kv_heads divides "
          "heads: " +
          params_.str());
    if (d_.scale < 0) value_error("Attention: scale is positive (0: 1/sqrt(head_dim))");
    if (d_.scale == 0) d_.scale = 1.0 / std::sqrt(double(d_.d));
  }

  void reference(const RefCall& c) const override {
    const RefOperand &q = c.in[0], &k = c.in[1], &v = c.in[2], &y = c.out[0];
    const int64_t rows = valid_rows(q), d = d_.d;
    const int64_t start = c.scalars.at(0);
    const int64_t cache_rows = std::min(k.valid.at(0), v.valid.at(0));
    std::vector<double> scores, out(static_cast<size_t>(d));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < d_.heads; ++h) {
        const int64_t g = h / d_.group(), keys = d_.keys(start + r, cache_rows);
        const float* qr = q.data + (r * d_.heads + h) * d;
        float* yr = y.data + (r * d_.heads + h) * d;
        scores.assign(size_t(keys), 0.0);
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          double s = 0;
          for (int64_t i = 0; i < d; ++i) s += double(qr[i]) * double(k.data[d_.at(j, g) + i]);
          scores[size_t(j)] = s * d_.scale;
          top = std::max(top, scores[size_t(j)]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - top));
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = 0; j < keys; ++j)
          for (int64_t i = 0; i < d; ++i)
            out[size_t(i)] += scores[size_t(j)] * double(v.data[d_.at(j, g) + i]);
        for (int64_t i = 0; i < d; ++i)
          yr[i] = round_to(y.dtype, keys ? float(out[size_t(i)] / sum) : 0.0f);
      }
  }

  Tolerance tolerance(Precision) const override { return {2e-5, 1e-4}; }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const override {
    return std::make_unique<Kernel>(d_, a, tunables_.integer("block"));
  }

  Dims d_;
};

}  // namespace

CatalogEntry attention_entry() { return entry<Attention>(kAttention); }

}  // namespace iron::ops
