#include "iron/functional.hpp"

#include <cmath>
#include <limits>

#include "graph/recording.hpp"
#include "iron/error.hpp"

namespace iron {

namespace {

// Records `op` over dense inputs and returns its one output, of x's rows and bounds.
Handle step(const std::string& op, Fields params, std::vector<Handle> in, const Shape& shape, DType dtype,
            const std::vector<std::optional<Affine>>& bounds, Precision precision = Precision::highest,
            std::vector<Affine> scalars = {}, const Handle& into = {}) {
  Recorder& r = Recorder::require(op);
  for (Handle& h : in)
    if (h.defined()) h = dense(h);
  Step s;
  s.op = r.make(op, std::move(params));
  s.in = std::move(in);
  std::vector<std::optional<Affine>> valid(shape.size());
  for (size_t a = 0; a < std::min(valid.size(), bounds.size()); ++a) valid[a] = bounds[a];
  Handle out;
  if (into.defined()) {
    // Written straight into the caller's view (a KV-cache window): no copy after.
    if (into.layout() != Layout::dense || into.numel() != element_count(shape) || into.dtype() != dtype)
      value_error(op + " writes " + to_string(shape) + " " + std::string(name(dtype)) + ", not into " + into.str());
    out = (into.shape() == shape ? into : into.reshape(shape)).with_bounds(valid);
  } else {
    out = r.scratch(op, shape, dtype).with_bounds(valid);
  }
  s.out = {out};
  s.precision = precision;
  s.scalars = std::move(scalars);
  r.add_step(std::move(s));
  return out;
}

Handle elementwise(const char* op, const Handle& a, const Handle& b) {
  if (!a.defined() || !b.defined()) type_error(std::string(op) + " of an undefined handle");
  bool broadcast = b.shape() != a.shape();
  if (broadcast && !(b.numel() == a.shape().back() && !a.shape().empty()))
    value_error(std::string(op) + ": " + b.str() + " is neither " + a.str() +
                "'s shape nor one row of its last axis");
  Fields params{{"elements", a.numel()}, {"broadcast_row", broadcast}};
  // A bound either operand has holds for the result (x + f(x[:n]) has n valid rows).
  auto bounds = a.bounds();
  if (!broadcast)
    for (size_t axis = 0; axis < bounds.size(); ++axis)
      if (!bounds[axis]) bounds[axis] = b.bounds()[axis];
  return step(op, params, {a, b}, a.shape(), a.dtype(), bounds);
}

DType activation_dtype(const Handle& x) { return info(x.dtype()).floating && !info(x.dtype()).quantised ? x.dtype() : f32; }

}  // namespace

Handle operator+(const Handle& a, const Handle& b) { return elementwise("Add", a, b); }
Handle operator-(const Handle& a, const Handle& b) { return elementwise("Sub", a, b); }
Handle operator*(const Handle& a, const Handle& b) { return elementwise("Mul", a, b); }
Handle operator/(const Handle& a, const Handle& b) { return elementwise("Div", a, b); }

Handle matmul(const Handle& row, const Handle& matrix) {
  bool one_row = row.rank() == 1 || (row.rank() == 2 && row.dim(0) == 1);
  if (!one_row || matrix.rank() != 2 || row.shape().back() != matrix.dim(0))
    value_error("matmul: " + row.str() + " @ " + matrix.str() + " is not one row (k,) @ (k, n)");
  Shape out = row.rank() == 1 ? Shape{matrix.dim(1)} : Shape{1, matrix.dim(1)};
  Fields p{{"M", int64_t(1)}, {"K", matrix.dim(0)}, {"N", matrix.dim(1)}, {"b_col_maj", false}};
  return step("GEMM", p, {row, matrix}, out, activation_dtype(row), row.bounds());
}

// Sampling::check() and SamplingRow, whose words are the Sample operator's settings operand,
// are defined beside that operator (ops/sample/settings.cpp).

namespace functional {

Handle linear(const Handle& x, const Handle& weight, const Handle& bias, Precision precision, const Fields& gemv,
              const Handle& into) {
  if (into.defined() && bias.defined()) value_error("linear(): a bias cannot go with `into`");
  if (x.rank() != 1 && x.rank() != 2) value_error("linear(): x " + to_string(x.shape()) + " is not (in,) or (rows, in)");
  if (weight.rank() != 2 || weight.dim(1) != x.shape().back())
    value_error("linear(): weight " + weight.str() + " is not (out, " + std::to_string(x.shape().back()) + ")");
  const int64_t k = weight.dim(1), n = weight.dim(0);
  // One row runs on GEMV, rounded once from f32 sums, unless MEDIUM allows rounding the row to a
  // block format: then a one-row ProjectionGEMM may take int8 dot products.
  bool one_row = (x.rank() == 1 || x.dim(0) == 1) && precision != Precision::medium;
  Shape out = x.rank() == 1 ? Shape{n} : Shape{x.dim(0), n};
  Handle y;
  if (one_row) {
    Fields p{{"K", k}, {"N", n}};
    for (const auto& [name, v] : gemv.items()) p.set(name, v);
    y = step("GEMV", p, {x, weight}, out, activation_dtype(x), x.bounds(), Precision::highest, {}, into);
  } else if (!gemv.empty()) {
    value_error("linear(): " + std::to_string(x.dim(0)) + " rows take no GEMV " + gemv.str());
  } else {
    Fields p{{"M", x.dim(0)}, {"K", k}, {"N", n}, {"b_col_maj", true}, {"precision", std::string(name(precision))}};
    y = step(precision == Precision::highest ? "GEMM" : "ProjectionGEMM", p, {x, weight}, out, activation_dtype(x),
             x.bounds(), precision, {}, into);
  }
  if (!bias.defined()) return y;
  if (bias.numel() != n) value_error("linear(): bias " + bias.str() + " is not (" + std::to_string(n) + ",)");
  return y + bias;
}

Handle linear_residual(const Handle& x, const Handle& weight, const Handle& residual, Precision precision) {
  if (x.rank() != 1 && x.rank() != 2) value_error("linear_residual(): x " + to_string(x.shape()) + " is not (in,) or (rows, in)");
  if (weight.rank() != 2 || weight.dim(1) != x.shape().back())
    value_error("linear_residual(): weight " + weight.str() + " is not (out, " + std::to_string(x.shape().back()) + ")");
  const int64_t k = weight.dim(1), n = weight.dim(0);
  Shape out = x.rank() == 1 ? Shape{n} : Shape{x.dim(0), n};
  if (residual.shape() != out) value_error("linear_residual(): residual " + residual.str() + " is not " + to_string(out));
  // The result's bounds: the residual's where it has them (x + f(x[:n]) keeps n rows), else x's.
  auto bounds = x.bounds();
  for (size_t a = 0; a < bounds.size() && a < residual.bounds().size(); ++a)
    if (residual.bounds()[a]) bounds[a] = residual.bounds()[a];
  bool one_row = (x.rank() == 1 || x.dim(0) == 1) && precision != Precision::medium;
  if (one_row)
    return step("GEMV", {{"K", k}, {"N", n}, {"residual", true}}, {x, weight, residual}, out, activation_dtype(x), bounds);
  Fields p{{"M", x.dim(0)}, {"K", k}, {"N", n}, {"b_col_maj", true}, {"precision", std::string(name(precision))},
           {"residual", true}};
  return step(precision == Precision::highest ? "GEMM" : "ProjectionGEMM", p, {x, weight, residual}, out,
              activation_dtype(x), bounds, precision);
}

namespace {
void check_last_axis(const char* what, const Handle& x, int64_t normalized_shape) {
  if (x.rank() == 0 || x.shape().back() != normalized_shape)
    value_error(std::string(what) + ": normalized_shape " + std::to_string(normalized_shape) +
                " is not the last axis of " + x.str());
}
}  // namespace

Handle rms_norm(const Handle& x, int64_t normalized_shape, const Handle& weight, std::optional<double> eps) {
  check_last_axis("rms_norm", x, normalized_shape);
  double e = eps ? *eps
                 : (x.dtype() == bf16 ? 1.0 / 128 : x.dtype() == f16 ? 1.0 / 1024 : double(std::numeric_limits<float>::epsilon()));
  Fields p{{"N", normalized_shape}, {"epsilon", e}, {"weighted", weight.defined()}};
  std::vector<Handle> in{x};
  if (weight.defined()) in.push_back(weight);
  return step("RMSNorm", p, in, x.shape(), activation_dtype(x), x.bounds());
}

Handle layer_norm(const Handle& x, int64_t normalized_shape, const Handle& weight, const Handle& bias, double eps) {
  check_last_axis("layer_norm", x, normalized_shape);
  Fields p{{"N", normalized_shape}, {"epsilon", eps}, {"weighted", weight.defined()}};
  std::vector<Handle> in{x};
  if (weight.defined()) in.push_back(weight);
  Handle y = step("LayerNorm", p, in, x.shape(), activation_dtype(x), x.bounds());
  return bias.defined() ? y + bias : y;
}

Handle silu(const Handle& x) { return step("SiLU", {{"elements", x.numel()}}, {x}, x.shape(), activation_dtype(x), x.bounds()); }

Handle gelu(const Handle& x, const std::string& approximate) {
  return step("GELU", {{"elements", x.numel()}, {"approximate", approximate}}, {x}, x.shape(), activation_dtype(x), x.bounds());
}

namespace {
Handle rope_step(const Handle& x, const Handle& table, const std::string& mode, const std::string& kind,
                 const Handle& into = {}) {
  if (x.rank() < 1 || x.rank() > 3) value_error("rope(): x " + x.str() + " is not (rows, [heads,] head_dim)");
  int64_t d = x.shape().back(), heads = x.rank() == 3 ? x.dim(1) : 1;
  int64_t rows = x.rank() == 1 ? 1 : x.dim(0);
  int64_t width = kind == "cos_sin" ? d : d / 2;
  if (table.numel() != rows * width)
    value_error("rope(): the table " + table.str() + " is not a row of " + std::to_string(width) + " per row of " + x.str());
  Fields p{{"head_dim", d}, {"heads", heads}, {"mode", mode}, {"table", kind}};
  return step("RoPE", p, {x, table}, x.shape(), activation_dtype(x), x.bounds(), Precision::highest, {}, into);
}
}  // namespace

Handle rope(const Handle& x, const Handle& angles, const std::string& mode) { return rope_step(x, angles, mode, "angles"); }
Handle rope_cos_sin(const Handle& x, const Handle& table, const std::string& mode, const Handle& into) {
  return rope_step(x, table, mode, "cos_sin", into);
}

Handle silu_mul(const Handle& gate, const Handle& up) { return elementwise("SwiGLU", gate, up); }
Handle gelu_tanh_mul(const Handle& gate, const Handle& up) { return elementwise("GeGLU", gate, up); }

Handle softmax(const Handle& x, double scale) {
  if (x.rank() == 0) value_error("softmax() of a scalar");
  return step("Softmax", {{"N", x.shape().back()}, {"scale", scale}}, {x}, x.shape(), activation_dtype(x), x.bounds());
}

Handle argmax(const Handle& logits) {
  if (!(logits.rank() == 1 || (logits.rank() == 2 && logits.dim(0) == 1)))
    value_error("argmax(): logits " + logits.str() + " are not one row");
  return step("Sample", {{"N", logits.shape().back()}}, {logits}, {1}, i32, {});
}

Handle sample(const Handle& logits, double temperature, int64_t top_k, double top_p, uint64_t seed,
              const Affine& step_count, const Affine& position) {
  if (!(logits.rank() == 1 || (logits.rank() == 2 && logits.dim(0) == 1)))
    value_error("sample(): logits " + logits.str() + " are not one row");
  // The seed's 64 bits travel in a signed param, bit for bit.
  Fields p{{"N", logits.shape().back()}, {"temperature", temperature}, {"top_k", top_k}, {"top_p", top_p},
           {"seed", int64_t(seed)}};
  return step("Sample", p, {logits}, {1}, i32, {}, Precision::highest, {step_count, position});
}

Handle sample(const Handle& logits, const Handle& settings, const Affine& step_count, const Affine& position) {
  if (!(logits.rank() == 1 || (logits.rank() == 2 && logits.dim(0) == 1)))
    value_error("sample(): logits " + logits.str() + " are not one row");
  if (!settings.defined() || settings.dtype() != i32 || settings.numel() != kSampleSettingsWords)
    value_error("sample(): settings " + (settings.defined() ? settings.str() : std::string("(none)")) + " are not " +
                std::to_string(kSampleSettingsWords) + " i32 words (functional::sample_settings)");
  return step("Sample", {{"N", logits.shape().back()}}, {logits, settings.reshape({kSampleSettingsWords})}, {1}, i32,
              {}, Precision::highest, {step_count, position});
}

Tensor sample_settings(double temperature, int64_t top_k, double top_p, uint64_t seed) {
  const SamplingRow row(Sampling{temperature, top_k, top_p, seed});
  return Tensor::from_ints(std::vector<int32_t>(row.words.begin(), row.words.end()), {kSampleSettingsWords});
}

Handle scalar(const std::vector<Affine>& terms) {
  if (terms.empty()) value_error("scalar() of no terms");
  return step("Scalar", {{"terms", int64_t(terms.size())}}, {}, {1}, i32, {}, Precision::highest, terms);
}

Handle attention(const Handle& q, const Handle& k_cache, const Handle& v_cache, const Affine& start,
                 std::optional<double> scale, int64_t window, Precision precision) {
  if (!q.defined() || !k_cache.defined() || !v_cache.defined())
    type_error("attention() of an undefined handle");
  if (q.rank() != 3 || k_cache.rank() != 3 || k_cache.shape() != v_cache.shape())
    value_error("attention(): q " + q.str() + " is not (rows, heads, head_dim) or the caches " +
                k_cache.str() + " and " + v_cache.str() +
                " are not both (ctx, kv_heads, head_dim)");
  const int64_t heads = q.dim(1), d = q.dim(2), ctx = k_cache.dim(0), kv_heads = k_cache.dim(1);
  if (k_cache.dim(2) != d || heads % kv_heads != 0)
    value_error("attention(): q " + q.str() + " and caches " + k_cache.str() +
                " need one head_dim and kv_heads dividing heads");
  if (scale && !(*scale > 0)) value_error("attention(): scale is positive");
  if (window < 0) value_error("attention(): window is a count of positions (0: none)");
  Recorder& r = Recorder::require("attention()");
  r.limit(start, 0, ctx,
          "attention start " + start.str() + " in a cache of " + std::to_string(ctx));
  Fields p{{"heads", heads},
           {"kv_heads", kv_heads},
           {"head_dim", d},
           {"ctx", ctx},
           {"scale", scale.value_or(1.0 / std::sqrt(double(d)))},
           {"window", window}};
  return step("Attention", p, {q, k_cache, v_cache}, q.shape(), activation_dtype(q), q.bounds(), precision,
              {start});
}

Handle segment_attention(const Handle& q, const Handle& k, const Handle& v, const Handle& lengths,
                         int64_t segment, std::optional<double> scale, int64_t window, Precision precision) {
  if (!q.defined() || !k.defined() || !v.defined() || !lengths.defined())
    type_error("segment_attention() of an undefined handle");
  if (q.rank() != 3 || k.rank() != 3 || k.shape() != v.shape() || q.dim(0) != k.dim(0))
    value_error("segment_attention(): q " + q.str() + ", k " + k.str() + " and v " + v.str() +
                " are not (rows, heads, head_dim) of the same rows");
  const int64_t rows = q.dim(0), heads = q.dim(1), d = q.dim(2), kv_heads = k.dim(1);
  if (k.dim(2) != d || heads % kv_heads != 0)
    value_error("segment_attention(): q " + q.str() + " and k " + k.str() +
                " need one head_dim and kv_heads dividing heads");
  if (segment <= 0 || rows % segment != 0)
    value_error("segment_attention(): segments of " + std::to_string(segment) + " rows do not tile " +
                std::to_string(rows) + " rows");
  if (lengths.dtype() != i32 || lengths.shape() != Shape{rows / segment})
    value_error("segment_attention(): lengths " + lengths.str() + " is not (" +
                std::to_string(rows / segment) + ",) i32");
  if (scale && !(*scale > 0)) value_error("segment_attention(): scale is positive");
  if (window < 0) value_error("segment_attention(): window is a count of rows (0: none), not " + std::to_string(window));
  // Rows of one segment are less than `segment` apart: such a window holds them all, and without
  // it the kernel may take its fastest loops (AMX's whole segments).
  if (window >= segment) window = 0;
  Fields p{{"heads", heads},
           {"kv_heads", kv_heads},
           {"head_dim", d},
           {"ctx", rows},
           {"scale", scale.value_or(1.0 / std::sqrt(double(d)))},
           {"window", window},
           {"segment", segment}};
  return step("Attention", p, {q, k, v, lengths}, q.shape(), activation_dtype(q), q.bounds(), precision,
              {Affine(0)});
}

namespace {
// A per-row i32 input of a batch: (rows,) i32.
void require_rows(const char* what, const char* name, const Handle& h, int64_t rows) {
  if (!h.defined() || h.dtype() != i32 || h.shape() != Shape{rows})
    value_error(std::string(what) + ": " + name + " " + (h.defined() ? h.str() : std::string("(none)")) +
                " is not (" + std::to_string(rows) + ",) i32");
}
}  // namespace

Handle slot_rows(const Handle& slots, const Handle& positions, int64_t slots_count, int64_t rows_per_slot) {
  if (!slots.defined()) type_error("slot_rows() of an undefined handle");
  require_rows("slot_rows()", "slots", slots, slots.dim(0));
  require_rows("slot_rows()", "positions", positions, slots.dim(0));
  if (slots_count <= 0 || rows_per_slot <= 0 || slots_count * rows_per_slot >= (int64_t(1) << 31))
    value_error("slot_rows(): slots and rows per slot are positive and their product fits i32");
  Recorder& r = Recorder::require("slot_rows()");
  r.limit_ids(slots, slots_count, "a cache slot (of " + std::to_string(slots_count) + ")");
  r.limit_ids(positions, rows_per_slot, "a position in a cache slot of " + std::to_string(rows_per_slot) + " rows");
  return step("SlotRows", {{"slots", slots_count}, {"slot_rows", rows_per_slot}}, {slots, positions},
              {slots.dim(0)}, i32, {});
}

Handle slot_attention(const Handle& q, const Handle& k_cache, const Handle& v_cache, const Handle& positions,
                      const Handle& slots, int64_t slot_rows, std::optional<double> scale, int64_t window,
                      Precision precision) {
  if (!q.defined() || !k_cache.defined() || !v_cache.defined())
    type_error("slot_attention() of an undefined handle");
  if (q.rank() != 3 || k_cache.rank() != 3 || k_cache.shape() != v_cache.shape())
    value_error("slot_attention(): q " + q.str() + " is not (rows, heads, head_dim) or the caches " + k_cache.str() +
                " and " + v_cache.str() + " are not both (ctx, kv_heads, head_dim)");
  const int64_t rows = q.dim(0), heads = q.dim(1), d = q.dim(2), ctx = k_cache.dim(0), kv_heads = k_cache.dim(1);
  if (k_cache.dim(2) != d || heads % kv_heads != 0)
    value_error("slot_attention(): q " + q.str() + " and caches " + k_cache.str() +
                " need one head_dim and kv_heads dividing heads");
  if (slot_rows <= 0 || ctx % slot_rows != 0)
    value_error("slot_attention(): slots of " + std::to_string(slot_rows) + " rows do not tile a cache of " +
                std::to_string(ctx));
  require_rows("slot_attention()", "positions", positions, rows);
  require_rows("slot_attention()", "slots", slots, rows);
  if (scale && !(*scale > 0)) value_error("slot_attention(): scale is positive");
  if (window < 0) value_error("slot_attention(): window is a count of positions (0: none)");
  Recorder& r = Recorder::require("slot_attention()");
  r.limit_ids(slots, ctx / slot_rows, "a cache slot (of " + std::to_string(ctx / slot_rows) + ")");
  r.limit_ids(positions, slot_rows, "a position in a cache slot of " + std::to_string(slot_rows) + " rows");
  Fields p{{"heads", heads},
           {"kv_heads", kv_heads},
           {"head_dim", d},
           {"ctx", ctx},
           {"scale", scale.value_or(1.0 / std::sqrt(double(d)))},
           {"window", window},
           {"slot_rows", slot_rows}};
  return step("Attention", p, {q, k_cache, v_cache, positions, slots}, q.shape(), activation_dtype(q), q.bounds(),
              precision, {Affine(0)});
}

Handle sample_rows(const Handle& logits, const Handle& settings, const Handle& steps, const Handle& positions) {
  if (!logits.defined() || logits.rank() != 2) value_error("sample_rows(): logits are (rows, vocab)");
  const int64_t rows = logits.dim(0);
  if (!settings.defined() || settings.dtype() != i32 || settings.shape() != Shape{rows, kSampleSettingsWords})
    value_error("sample_rows(): settings " + (settings.defined() ? settings.str() : std::string("(none)")) +
                " are not (" + std::to_string(rows) + ", " + std::to_string(kSampleSettingsWords) + ") i32");
  require_rows("sample_rows()", "steps", steps, rows);
  require_rows("sample_rows()", "positions", positions, rows);
  return step("Sample", {{"N", logits.dim(1)}, {"rows", rows}}, {logits, settings, steps, positions}, {rows}, i32, {});
}

Handle segment_mean(const Handle& x, const Handle& lengths, int64_t segment) {
  if (!x.defined() || !lengths.defined()) type_error("segment_mean() of an undefined handle");
  if (x.rank() != 2 || segment <= 0 || x.dim(0) % segment != 0)
    value_error("segment_mean(): x " + x.str() + " is not (rows, N) of whole segments of " +
                std::to_string(segment) + " rows");
  const int64_t batch = x.dim(0) / segment;
  if (lengths.dtype() != i32 || lengths.shape() != Shape{batch})
    value_error("segment_mean(): lengths " + lengths.str() + " is not (" + std::to_string(batch) + ",) i32");
  return step("SegmentMean", {{"segment", segment}, {"N", x.dim(1)}}, {x, lengths}, {batch, x.dim(1)},
              activation_dtype(x), {});
}

Handle copy(const Handle& x, std::optional<DType> dtype) {
  Recorder& r = Recorder::require("copy()");
  Handle out = r.scratch("copy", x.shape(), dtype.value_or(x.dtype())).with_bounds(x.bounds());
  out.assign(x);
  return out;
}

Handle causal_conv1d(const Handle& x, const Handle& taps, const ConvState& state) {
  Handle window = state.window, tail = state.tail;
  if (taps.rank() != 2 || window.rank() != 3 || x.rank() != 2)
    value_error("causal_conv1d(): taps (K, channels), window (2, chunk, channels) and x (rows, channels)");
  const int64_t K = taps.dim(0), C = window.dim(1), channels = x.dim(1);
  if (K < 2 || K - 1 > C) value_error("causal_conv1d(): K " + std::to_string(K) + " taps need 2 <= K <= chunk + 1");
  // Block 0 of the window ends with the rows before the call; block 1 holds the call's rows.
  Handle flat = window.reshape({2 * C, channels});
  const int64_t first = C - (K - 1);
  flat[range(first, C)].assign(state.read);
  const auto& rows = x.valid(0);
  if (!rows) {
    flat[range(C, C + 1)].assign(x);
    Handle y = x * taps[K - 1];
    for (int64_t k = 0; k < K - 1; ++k) y = y + flat[range(first + k, first + k + 1)] * taps[k];
    state.write.assign(flat[range(first + 1, C + 1)]);
    return y;
  }
  window[1].assign(x.bounded(0, *rows).with_bounds({*rows, std::nullopt}));
  Handle y = flat[range(first, first + C)] * taps[0];
  for (int64_t k = 1; k < K; ++k) y = y + flat[range(first + k, first + k + C)] * taps[k];
  y = y[upto(*rows)];
  for (int64_t j = 0; j < K - 1; ++j) tail[j].assign(flat[at(*rows + (first + j))]);
  state.write.assign(tail);
  return y;
}

}  // namespace functional
}  // namespace iron
