// Attention: causal grouped-query attention of query rows over a KV cache, as Llama-family models
// use it. q (rows, heads, head_dim) over k_cache and v_cache (ctx, kv_heads, head_dim); query
// head h reads kv head h / (heads / kv_heads). Query row r of a call sits at absolute position
// start + r (start: the step's per-call scalar 0) and attends to cache positions [0, start + r],
// held to the cache's ctx rows (and its per-call bound on axis 0, if any); with a sliding `window`
// (Gemma's local layers) only to the last `window` of them, its own included, and only those are
// read. Rows of q may be bounded per call; rows past the bound are not written. `scale` 0 (the
// default) is 1/sqrt(head_dim).
//
// With `segment` S > 0 it is an encoder's bidirectional attention over a padded batch instead:
// q, k and v hold the same rows (ctx of them), in segments of S rows (one sentence each), and a
// fourth operand, `lengths` (ctx / S,) i32, gives each segment's valid rows this call (a graph
// input, read per call; each held to [0, S]). Row r of segment b attends to rows
// [b S, b S + lengths[b]) whatever its own place (with a `window` W, only those less than W rows
// from it either way: a bidirectional sliding window); rows at or past their segment's length
// (the padding) are written as zeros. The start scalar is not read.
//
// With `slot_rows` R > 0 it is a batched decode over a cache of ctx / R slots of R rows each:
// fourth and fifth operands `positions` and `slots` (rows,) i32 (graph inputs, read per call)
// place query row b at position positions[b] of slot slots[b], and it attends to keys
// [slots[b] R, slots[b] R + positions[b]] (the last `window` of them, with one), exactly as a
// one-row decode of that slot's rows alone would: the same partial cuts, combined in the same
// order, so a row's result depends neither on the other rows nor on the thread count. A row whose
// slot or position is out of range (the host checks graph inputs before a run) is written as
// zeros. The start scalar is not read.
#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "iron/handle.hpp"
#include "ops/attention/rows.hpp"
#include "ops/attention/segment_amx.hpp"
#include "ops/attention/tile.hpp"
#include "ops/op.hpp"

namespace iron::ops {

namespace {

const Declaration kAttention{"Attention",
                             nullptr,
                             {{"heads", std::nullopt},
                              {"kv_heads", std::nullopt},
                              {"head_dim", std::nullopt},
                              {"ctx", std::nullopt},
                              {"scale", 0.0},
                              {"window", int64_t(0)},
                              {"segment", int64_t(0)},
                              {"slot_rows", int64_t(0)}},
                             {// A decode step's keys per partial, at least (rounded to 16).
                              {"split", int64_t(128), {int64_t(64), int64_t(128), int64_t(256), int64_t(512)}},
                              // A prefill's query vectors per tile: whole rows of every head
                              // (each tile reads its keys once; 16 measured slower than 64).
                              {"tile", int64_t(64), {int64_t(16), int64_t(32), int64_t(64), int64_t(128)}},
                              // "per_head": the kernel before grouped tiles (each query head of
                              // each row alone, its keys on one thread), kept as the benchmark's
                              // baseline; `block` is its softmax block.
                              {"path", std::string("grouped")},
                              {"block", int64_t(128)}}};

// A decode step's keys are split into at most this many partials: enough to share them among
// many threads; the partials take kMaxPartials * heads * (head_dim + 2) floats per kernel.
constexpr int64_t kMaxPartials = 32;

// Decode partials of at least `floats`, shared by every Attention kernel: a kernel's partials
// live only within its own run, and no two Attention kernels run at once (the pool serves one
// run at a time, and one layer's attention reads what the one before it wrote, so two are never
// in one phase). A batched prefill of 64 rows needs 64 rows' worth (5 MiB for SmolLM2); one
// buffer instead of one per layer. Grown at construction under a mutex; an outgrown buffer is
// kept (a kernel made before still points into it) until exit.
float* shared_partials(size_t floats) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<float[]>> kept;
  static size_t size = 0;
  std::lock_guard lock(mutex);
  if (kept.empty() || floats > size) {
    kept.push_back(std::make_unique<float[]>(floats));
    size = floats;
  }
  return kept.back().get();
}

struct Dims {
  int64_t heads, kv_heads, d, ctx;
  double scale;
  int64_t window = 0;   // 0: every earlier position
  int64_t segment = 0;  // > 0: bidirectional within segments of this many rows (lengths operand)
  int64_t slot_rows = 0;  // > 0: a batched decode over slots of this many rows (positions, slots)
  int64_t group() const { return heads / kv_heads; }
  /// The rows a query's keys may come from: a slot's, or the whole cache's.
  int64_t span() const { return slot_rows > 0 ? slot_rows : ctx; }
  /// Where query row b of a batched decode sits (slots and positions as the operands hold them):
  /// its slot's first cache row, and its position in the slot; nullopt when either is out of range.
  std::optional<std::pair<int64_t, int64_t>> slot_place(int64_t slot, int64_t position) const {
    if (slot < 0 || slot >= ctx / slot_rows || position < 0 || position >= slot_rows) return std::nullopt;
    return std::pair<int64_t, int64_t>{slot * slot_rows, position};
  }
  /// The first element of key (or value) `j` of kv head `g` in a cache.
  int64_t at(int64_t j, int64_t g) const { return (j * kv_heads + g) * d; }
  /// Keys a query at absolute `position` attends to, given `cache_rows` valid cache rows.
  int64_t keys(int64_t position, int64_t cache_rows) const {
    return std::max<int64_t>(0, std::min({position + 1, span(), cache_rows}));
  }
  /// The first key a query at absolute `position` attends to: 0, or its window's first.
  int64_t first(int64_t position) const { return window > 0 ? std::max<int64_t>(0, position - window + 1) : 0; }
  /// The keys [first, last) row r of a segmented call attends to, its segment holding `length`
  /// valid rows (held to [0, segment]): those rows (within the window of r, with one), none for
  /// a padding row.
  std::pair<int64_t, int64_t> segment_keys(int64_t r, int64_t length, int64_t cache_rows) const {
    const int64_t b = r / segment, first = b * segment;
    length = std::clamp<int64_t>(length, 0, segment);
    if (r - first >= length) return {first, first};
    int64_t lo = first, hi = std::min(first + length, cache_rows);
    if (window > 0) lo = std::max(lo, r - window + 1), hi = std::min(hi, r + window);
    return {lo, std::max(lo, hi)};
  }
};

void require_shape(const char* what, const cpu::Operand& o, const Shape& tail) {
  bool ok = o.rank() == 3 && o.shape[1] == tail[0] && o.shape[2] == tail[1] &&
            o.strides == contiguous_strides(o.shape);
  if (!ok)
    value_error(std::string("Attention: ") + what + " " + to_string(o.shape) +
                " is not a dense (rows, " + std::to_string(tail[0]) + ", " +
                std::to_string(tail[1]) + ")");
}

// Each thread's part of `units`, equal shares of cost(u), not of units: part t is [starts[t],
// starts[t + 1]), in one walk. A causal prefill's last rows read many more keys than its first
// (an even split of 512 rows left one thread idle for 38% of the call).
template <class Cost>
void balanced_starts(int64_t units, const Cost& cost, int threads, int64_t* starts) {
  int64_t total = 0;
  for (int64_t u = 0; u < units; ++u) total += cost(u);
  int t = 0;
  int64_t before = 0;
  for (int64_t u = 0; u < units && t < threads; ++u) {
    while (t < threads && before >= total * t / threads) starts[t++] = u;
    before += cost(u);
  }
  while (t < threads) starts[t++] = units;
  starts[threads] = units;
}

// A segmented (encoder) call's tiles take at least this many rows: every tile converts each key
// and value of its segment again, and an encoder's heads are many (12 of head_dim 32 in
// all-MiniLM-L6-v2: the default tile of 64 query vectors is 5 rows, 26 conversions of each
// 128-row segment).
constexpr int64_t kSegmentTileRows = 16;

// Each query row's heads as a tile against blocks of whole cache rows (every kv head's key of a
// position), so each row is read once, in order. Prefill: a tile is a few rows' heads against
// all the keys its rows attend to, tiles balanced across threads by the keys they read. Decode
// (one row): the keys are cut into partials spread over threads, and the thread that finishes
// the last partial combines them (log-sum-exp rescaling). The cuts depend on the number of keys
// alone and every output is computed in one order, so results do not depend on the thread count.
// The vector tiles a grouped (not per-head) kernel runs on `f`: AVX-512's where it has one for
// these caches and head size, else Highway's (tile_hwy.cpp); none (the portable tile) where
// neither has, or keys and values differ in dtype. The kernel and the table's refusal both ask
// this, so what `iron info --kernels` says is what runs.
struct VectorTiles {
  attention::TileFn prefill = nullptr, decode = nullptr;
};
VectorTiles vector_tiles(const cpu::Features& f, DType k, DType v, int64_t d, Precision precision) {
  VectorTiles t;
  if (k != v) return t;
#if defined(__x86_64__)  // the x86 kernels are built for x86-64 alone (CMakeLists.txt)
  if (f.avx512f && f.avx512bw && f.avx512vl && f.f16c) {
    t.prefill = attention::avx512_tile(k, d);
    t.decode = attention::avx512_decode_tile(k, d);
    // At medium, a q8_0 cache's decode scores are int8 products where VNNI runs (the query
    // rounded to q8_0 blocks); highest and high keep the f32 products.
    if (precision == Precision::medium && k == DType::q8_0 && f.avx512vnni)
      if (attention::TileFn i = attention::avx512_decode_tile_q8_0_int8(d)) t.decode = i;
  }
#else
  (void)precision;
#endif
  if (!t.prefill) t.prefill = t.decode = attention::vector_tile(f, k, d);
  return t;
}

class Kernel final : public cpu::Kernel {
 public:
  Kernel(const Dims& dims, const cpu::KernelArgs& a, const Fields& tunables)
      : d_(dims),
        q_(a.in.at(0)),
        k_(a.in.at(1)),
        v_(a.in.at(2)),
        y_(a.out.at(0)),
        start_(a.scalars.at(0)),
        // The baseline path reads every earlier key: a sliding window or segments take the
        // grouped tiles.
        per_head_(tunables.text("path") == "per_head" && dims.window == 0 && dims.segment == 0),
        block_(std::max<int64_t>(1, tunables.integer("block"))),
        split_(std::max<int64_t>(1, tunables.integer("split"))),
        width_((d_.d + 15) / 16 * 16),
        rows_per_tile_(std::max<int64_t>(dims.segment > 0 ? kSegmentTileRows : 1, tunables.integer("tile") / d_.heads)),
        queries_(rows_per_tile_ * d_.heads) {
    require_shape("q", q_, {d_.heads, d_.d});
    require_shape("y", y_, {d_.heads, d_.d});
    require_shape("k_cache", k_, {d_.kv_heads, d_.d});
    require_shape("v_cache", v_, {d_.kv_heads, d_.d});
    if (k_.shape[0] != d_.ctx || v_.shape[0] != d_.ctx)
      value_error("Attention: caches of " + std::to_string(d_.ctx) + " rows, got " +
                  to_string(k_.shape) + " and " + to_string(v_.shape));
    if (d_.segment > 0) {
      if (a.in.size() < 4) value_error("Attention: segments need the lengths operand");
      lengths_ = a.in.at(3);
      if (q_.shape[0] != d_.ctx || lengths_.dtype != DType::i32 || lengths_.rank() != 1 ||
          lengths_.shape[0] != d_.ctx / d_.segment)
        value_error("Attention: segments of " + std::to_string(d_.segment) + " rows need q of " +
                    std::to_string(d_.ctx) + " rows (got " + to_string(q_.shape) +
                    ") and i32 lengths of " + std::to_string(d_.ctx / d_.segment) + " (got " +
                    to_string(lengths_.shape) + " " + std::string(name(lengths_.dtype)) + ")");
    }
    if (d_.slot_rows > 0) {
      if (a.in.size() < 5) value_error("Attention: a batched decode needs the positions and slots operands");
      positions_ = a.in.at(3);
      slots_ = a.in.at(4);
      for (const cpu::Operand* o : {&positions_, &slots_})
        if (o->dtype != DType::i32 || o->rank() != 1 || o->shape[0] != q_.shape[0])
          value_error("Attention: a batched decode of " + std::to_string(q_.shape[0]) +
                      " rows needs i32 positions and slots of as many, got " + to_string(o->shape) + " " +
                      std::string(name(o->dtype)));
      finished_rows_ = q_.shape[0];
    }
    finished_ = std::make_unique<std::atomic<int64_t>[]>(size_t(finished_rows_));
    for (const cpu::Operand* c : {&k_, &v_})
      if (c->dtype != f32 && c->dtype != f16 && c->dtype != bf16 && c->dtype != DType::q8_0)
        value_error("Attention: a cache of " + std::string(name(c->dtype)) + " (f32, f16, bf16 or q8_0 are read)");
    const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
    const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.f16c;
    if (per_head_) {
      // The query, the output accumulator, a key or value row, a block's scores.
      scratch_ = cpu::Scratch(size_t(3 * d_.d + block_));
      if (k_.dtype == f32 && v_.dtype == f32 && avx512) row_ = attention::avx512_row(d_.d);
      return;
    }
    const VectorTiles tiles = vector_tiles(f, k_.dtype, v_.dtype, d_.d, a.precision);
    tile_ = tiles.prefill;
    decode_tile_ = tiles.decode;
    int64_t scratch = state_floats() + attention::work_floats(width_, d_.kv_heads, queries_ / d_.kv_heads);
#if defined(__x86_64__)
    // At medium, an encoder's f32 attention on AMX tiles where the OS allows them (bf16 products,
    // as medium's matmuls); highest keeps the f32 tiles.
    segment_amx_ = d_.segment > 0 && d_.window == 0 && a.precision == Precision::medium && f.amx_bf16 && q_.dtype == f32 &&
                   k_.dtype == f32 && v_.dtype == f32 && y_.dtype == f32 && d_.d % 16 == 0 &&
                   d_.d <= attention::kSegmentAmxMaxDim && d_.segment <= attention::kSegmentAmxMaxRows;
    if (segment_amx_) scratch = std::max(scratch, attention::segment_amx_work_floats(d_.segment, d_.d));
#endif
    scratch_ = cpu::Scratch(size_t(scratch));
    partials_ = shared_partials(size_t(finished_rows_ * kMaxPartials * d_.heads * (width_ + 2)));
  }

  // Each query row against every key of the cache and its value, at most.
  int64_t multiply_adds() const override { return q_.shape[0] * d_.heads * d_.ctx * d_.d * 2; }

  void run(const int64_t* w, int thread, int threads) const override {
    const int64_t rows = q_.rows(w), start = start_.get(w);
    const int64_t cache_rows = std::min(k_.extent(0, w), v_.extent(0, w));
    if (per_head_)
      run_per_head(w, rows, start, cache_rows, thread, threads);
#if defined(__x86_64__)
    else if (segment_amx_)
      segments_amx(w, rows, cache_rows, thread, threads);
#endif
    else if (d_.segment > 0)
      segments(w, rows, cache_rows, thread, threads);
    else if (d_.slot_rows > 0)
      slot_decode(w, rows, cache_rows, thread, threads);
    else if (rows == 1)
      decode(w, start, cache_rows, thread, threads);
    else
      prefill(w, rows, start, cache_rows, thread, threads);
  }

 private:
  // A thread's scratch: a tile's scaled queries, accumulators, maxima, sums and limits, and
  // the tile's own work space.
  struct State {
    float *q, *acc, *max, *sum;
    int64_t *limit, *from;
    attention::Tile tile;
  };

  // A tile's queries and accumulators, then maxima, sums, limits and firsts (int64, two floats each),
  // rounded up so that the tile's work space after them is 64-byte aligned.
  int64_t state_floats() const { return 2 * queries_ * width_ + (6 * queries_ + 15) / 16 * 16; }

  // Query vector m of a tile of `count` rows: kv head by kv head, then row by row, then the
  // group's heads. Its row (from the tile's first) and its head.
  std::pair<int64_t, int64_t> row_and_head(int64_t m, int64_t count) const {
    const int64_t group = d_.group(), per = count * group, g = m / per;
    return {m % per / group, g * group + m % group};
  }

  // Sets up a tile of every head of `count` rows from row r0, over keys [begin, end).
  // In a batched decode (count 1) `start` is the row's position in its slot and `base` the
  // slot's first cache row; keys are then counted from the slot's first.
  State state(const int64_t* w, int thread, int64_t r0, int64_t count, int64_t begin, int64_t end, int64_t start,
              int64_t cache_rows, int64_t base = 0) const {
    const int64_t n = count * d_.heads, wd = width_;
    State s;
    s.q = scratch_.get(thread);
    s.acc = s.q + queries_ * wd;
    s.max = s.acc + queries_ * wd;
    s.sum = s.max + queries_;
    s.limit = reinterpret_cast<int64_t*>(s.sum + queries_);
    s.from = s.limit + queries_;
    const float scale = float(d_.scale);
    for (int64_t m = 0; m < n; ++m) {
      auto [r, h] = row_and_head(m, count);
      float* q = s.q + m * wd;
      load_row(q_, w, ((r0 + r) * d_.heads + h) * d_.d, q, d_.d);
      for (int64_t e = 0; e < d_.d; ++e) q[e] *= scale;
      std::fill(q + d_.d, q + wd, 0.0f);
      std::fill(s.acc + m * wd, s.acc + (m + 1) * wd, 0.0f);
      s.max[m] = -std::numeric_limits<float>::infinity();
      s.sum[m] = 0;
      if (d_.segment > 0) {
        const auto [first, last] = segment_keys(w, r0 + r, cache_rows);
        s.limit[m] = std::min(end, last);
        s.from[m] = first;
      } else {
        const int64_t position = d_.slot_rows > 0 ? start : start + r0 + r;
        s.limit[m] = std::min(end, d_.keys(position, cache_rows));
        s.from[m] = d_.first(position);
      }
    }
    const int64_t shift = base * d_.kv_heads * d_.d;
    s.tile = {s.q,      d_.kv_heads, count * d_.group(), k_.base, v_.base, k_.offset.get(w) + shift, v_.offset.get(w) + shift,
              d_.kv_heads * d_.d, d_.d, wd, begin, end, s.limit, s.from, s.max, s.sum, s.acc,
              s.q + state_floats()};
    return s;
  }

  // `decode`: the tile is one query row's (its group's few query vectors per kv head).
  void run_tile(const attention::Tile& t, bool decode = false) const {
    if (t.begin >= t.end) return;
    if (decode && decode_tile_)
      decode_tile_(t);
    else if (tile_)
      tile_(t);
    else
      attention::portable_tile(k_.dtype, v_.dtype, t);
  }

  // Writes the output row of head h of row r: `acc` over `sum` (zero where no key was read).
  void finish(const int64_t* w, int64_t r, int64_t h, float* acc, float sum) const {
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    for (int64_t e = 0; e < d_.d; ++e) acc[e] *= inv;
    store_row(y_, w, (r * d_.heads + h) * d_.d, acc, d_.d);
  }

  void prefill(const int64_t* w, int64_t rows, int64_t start, int64_t cache_rows, int thread, int threads) const {
    const int64_t per = rows_per_tile_, tiles = (rows + per - 1) / per;
    auto last_row = [&](int64_t t) { return std::min(rows, (t + 1) * per) - 1; };
    // A tile reads from its first row's first key to its last row's last. Each tile also pays a
    // fixed cost (its queries, its outputs) worth a few keys.
    auto cost = [&](int64_t t) {
      return std::max<int64_t>(0, d_.keys(start + last_row(t), cache_rows) - d_.first(start + t * per)) + 8;
    };
    share(tiles, cost, thread, threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t r0 = t * per, count = last_row(t) + 1 - r0;
        State s = state(w, thread, r0, count, d_.first(start + r0), d_.keys(start + r0 + count - 1, cache_rows), start,
                        cache_rows);
        run_tile(s.tile);
        for (int64_t m = 0; m < count * d_.heads; ++m) {
          auto [r, h] = row_and_head(m, count);
          finish(w, r0 + r, h, s.acc + m * width_, s.sum[m]);
        }
      }
    });
  }

  // The keys [first, last) row r of a segmented call attends to (Dims::segment_keys).
  std::pair<int64_t, int64_t> segment_keys(const int64_t* w, int64_t r, int64_t cache_rows) const {
    return d_.segment_keys(r, lengths_.data<int32_t>(w)[r / d_.segment], cache_rows);
  }
  // The keys rows [r0, r0 + count) of one segment read between them (empty when all are padding).
  std::pair<int64_t, int64_t> tile_keys(const int64_t* w, int64_t r0, int64_t count, int64_t cache_rows) const {
    auto [lo, hi] = segment_keys(w, r0, cache_rows);
    if (lo == hi) return {lo, hi};  // padding: so are the rows after it
    // The last valid row of the tile reads the furthest keys.
    const int64_t valid = std::min(count, std::max<int64_t>(1, lengths_.data<int32_t>(w)[r0 / d_.segment] - r0 % d_.segment));
    return {lo, segment_keys(w, r0 + valid - 1, cache_rows).second};
  }

  // A segmented call: tiles of rows that stay within one segment, each over the keys its rows
  // read (its segment's valid keys, or their windows'); padding rows read none. Tiles are
  // balanced across threads by the keys they read.
  void segments(const int64_t* w, int64_t rows, int64_t cache_rows, int thread, int threads) const {
    const int64_t per = std::min(rows_per_tile_, d_.segment);
    const int64_t per_segment = (d_.segment + per - 1) / per;
    const int64_t tiles = (rows + d_.segment - 1) / d_.segment * per_segment;
    auto rows_of = [&](int64_t t) {
      const int64_t r0 = t / per_segment * d_.segment + t % per_segment * per;
      const int64_t end = std::min({r0 + per, (t / per_segment + 1) * d_.segment, rows});
      return std::pair<int64_t, int64_t>{r0, std::max<int64_t>(0, end - r0)};
    };
    auto cost = [&](int64_t t) {
      const auto [r0, count] = rows_of(t);
      if (count == 0) return int64_t(0);
      const auto [first, last] = tile_keys(w, r0, count, cache_rows);
      return last - first + 8;
    };
    share(tiles, cost, thread, threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const auto [r0, count] = rows_of(t);
        if (count == 0) continue;
        const auto [first, last] = tile_keys(w, r0, count, cache_rows);
        State s = state(w, thread, r0, count, first, last, 0, cache_rows);
        run_tile(s.tile);
        for (int64_t m = 0; m < count * d_.heads; ++m) {
          auto [r, h] = row_and_head(m, count);
          finish(w, r0 + r, h, s.acc + m * width_, s.sum[m]);
        }
      }
    });
  }

#if defined(__x86_64__)
  // A segmented call on AMX tiles: each (segment, query head) whole on one thread (its keys
  // and values prepared once for all its rows), the pairs balanced across threads by their work.
  void segments_amx(const int64_t* w, int64_t rows, int64_t cache_rows, int thread, int threads) const {
    const int64_t S = d_.segment, segments = (rows + S - 1) / S;
    const int32_t* lengths = lengths_.data<int32_t>(w);
    // Segment b's query rows this call, the valid ones among them, and its keys.
    struct Rows {
      int64_t written, queries, keys;
    };
    auto rows_of = [&](int64_t b) {
      const int64_t first = b * S, length = std::clamp<int64_t>(lengths[b], 0, S);
      const int64_t written = std::min(S, rows - first);
      return Rows{written, std::min(length, written), std::clamp<int64_t>(cache_rows - first, 0, length)};
    };
    auto cost = [&](int64_t u) {
      const Rows r = rows_of(u / d_.heads);
      return r.written + r.queries * (r.keys + 8);
    };
    const int64_t q_stride = d_.heads * d_.d, kv_stride = d_.kv_heads * d_.d;
    share(segments * d_.heads, cost, thread, threads, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        const int64_t b = u / d_.heads, h = u % d_.heads, g = h / d_.group();
        const Rows r = rows_of(b);
        const int64_t q0 = (b * S * d_.heads + h) * d_.d, kv0 = (b * S * d_.kv_heads + g) * d_.d;
        attention::segment_head_amx({q_.data<float>(w) + q0, k_.data<float>(w) + kv0, v_.data<float>(w) + kv0,
                                     y_.data<float>(w) + q0, q_stride, kv_stride, d_.d, r.queries, r.written, r.keys,
                                     float(d_.scale), scratch_.get(thread)});
      }
    });
  }
#endif

  void decode(const int64_t* w, int64_t start, int64_t cache_rows, int thread, int threads) const {
    // The keys [lo, lo + keys): all the earlier positions, or a sliding window's.
    const int64_t lo = std::min(d_.first(start), d_.keys(start, cache_rows));
    const int64_t keys = d_.keys(start, cache_rows) - lo;
    const int64_t parts = std::max<int64_t>(1, std::min(kMaxPartials, (keys + split_ - 1) / split_));
    // The key parts shared out among the threads (cpu::SharedRanges), a part at a time.
    shared_.run(parts, 1, thread, threads, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        auto [first, last] = cpu::split(keys, int(c), int(parts), attention::kKeyBlock);
        State s = state(w, thread, 0, 1, lo + first, lo + last, start, cache_rows);
        run_tile(s.tile, /*decode=*/true);
        for (int64_t m = 0; m < d_.heads; ++m) {
          const int64_t h = row_and_head(m, 1).second;
          if (parts == 1) {
            finish(w, 0, h, s.acc + m * width_, s.sum[m]);
            continue;
          }
          keep_partial(0, c, h, s, m);
        }
        // The thread that finishes the last partial combines them; the count is zero again
        // before the next call begins (the pool's join orders them).
        if (parts > 1 && finished_[0].fetch_add(1, std::memory_order_acq_rel) == parts - 1) {
          combine(w, 0, parts, s.acc);
          finished_[0].store(0, std::memory_order_relaxed);
        }
      }
    });
  }

  // A batched decode's row b: its slot's first row, its position, its first key and its keys
  // (as decode() counts them for that slot alone) and its partials; parts 0 when the row's slot
  // or position is out of range.
  struct SlotRow {
    int64_t base = 0, position = 0, lo = 0, keys = 0, parts = 0;
  };
  SlotRow slot_row(const int64_t* w, int64_t b) const {
    SlotRow r;
    const auto place = d_.slot_place(slots_.data<int32_t>(w)[b], positions_.data<int32_t>(w)[b]);
    if (!place) return r;
    std::tie(r.base, r.position) = *place;
    const int64_t keys = d_.keys(r.position, d_.slot_rows);
    r.lo = std::min(d_.first(r.position), keys);
    r.keys = keys - r.lo;
    r.parts = std::max<int64_t>(1, std::min(kMaxPartials, (r.keys + split_ - 1) / split_));
    return r;
  }

  // Every row's partials are units of work, row after row, split among the threads by the keys
  // they read, not by their count (one row at 4000 keys beside seven at 20: split by count, one
  // thread read ~2500 keys and the other ~1640); each row is computed as decode() computes one
  // row (same cuts, same combine).
  // A batched decode's units in order, unit u being partial `part` of row `row` (rows with no
  // partials passed over); at() moves on, or back to unit 0 and on.
  struct UnitWalk {
    const Kernel& kernel;
    const int64_t* w;
    int64_t row = 0, before = 0, part = 0;
    SlotRow r;
    UnitWalk(const Kernel& k, const int64_t* words, int64_t rows)
        : kernel(k), w(words), r(rows > 0 ? k.slot_row(words, 0) : SlotRow{}) {}
    void at(int64_t u) {
      if (u < before) row = 0, before = 0, r = kernel.slot_row(w, 0);
      while (u >= before + r.parts) {
        before += r.parts;
        r = kernel.slot_row(w, ++row);
      }
      part = u - before;
    }
    // The keys of the current unit, from the row's first.
    std::pair<int64_t, int64_t> keys() const { return cpu::split(r.keys, int(part), int(r.parts), attention::kKeyBlock); }
  };

  void slot_decode(const int64_t* w, int64_t rows, int64_t, int thread, int threads) const {
    int64_t units = 0;
    for (int64_t b = 0; b < rows; ++b) units += slot_row(w, b).parts;
    // Unit u's keys, plus a fixed cost (its queries, its outputs) worth a few keys.
    UnitWalk costs(*this, w, rows);
    auto cost = [&](int64_t u) {
      costs.at(u);
      const auto [first, last] = costs.keys();
      return last - first + 8;
    };
    if (thread == 0)  // rows out of range: zeros
      for (int64_t b = 0; b < rows; ++b)
        if (slot_row(w, b).parts == 0) {
          float* zeros = scratch_.get(0);
          std::fill(zeros, zeros + d_.d, 0.0f);
          for (int64_t h = 0; h < d_.heads; ++h) store_row(y_, w, (b * d_.heads + h) * d_.d, zeros, d_.d);
        }
    UnitWalk walk(*this, w, rows);
    share(units, cost, thread, threads, [&](int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u) {
        walk.at(u);
        const SlotRow& r = walk.r;
        const int64_t b = walk.row, c = walk.part;
        auto [first, last] = walk.keys();
        State s = state(w, thread, b, 1, r.lo + first, r.lo + last, r.position, d_.slot_rows, r.base);
        run_tile(s.tile, /*decode=*/true);  // one query row's tile, as decode() takes
        for (int64_t m = 0; m < d_.heads; ++m) {
          const int64_t h = row_and_head(m, 1).second;
          if (r.parts == 1)
            finish(w, b, h, s.acc + m * width_, s.sum[m]);
          else
            keep_partial(b, c, h, s, m);
        }
        if (r.parts > 1 && finished_[b].fetch_add(1, std::memory_order_acq_rel) == r.parts - 1) {
          combine(w, b, r.parts, s.acc);
          finished_[b].store(0, std::memory_order_relaxed);
        }
      }
    });
  }

  // Partial c of head h of row b: its maximum, its sum, its weighted values (head_dim floats).
  float* partial(int64_t b, int64_t c, int64_t h) const {
    return partials_ + ((b * kMaxPartials + c) * d_.heads + h) * (width_ + 2);
  }
  void keep_partial(int64_t b, int64_t c, int64_t h, const State& s, int64_t m) const {
    float* p = partial(b, c, h);
    p[0] = s.max[m];
    p[1] = s.sum[m];
    std::copy_n(s.acc + m * width_, d_.d, p + 2);
  }

  // Every head's output of row b from its partials: each rescaled from its own maximum to the largest.
  void combine(const int64_t* w, int64_t b, int64_t parts, float* out) const {
    for (int64_t h = 0; h < d_.heads; ++h) {
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < parts; ++c) top = std::max(top, partial(b, c, h)[0]);
      float sum = 0;
      std::fill(out, out + d_.d, 0.0f);
      for (int64_t c = 0; c < parts; ++c) {
        const float* p = partial(b, c, h);
        const float f = std::exp(p[0] - top);
        sum += f * p[1];
        for (int64_t e = 0; e < d_.d; ++e) out[e] += f * p[2 + e];
      }
      finish(w, b, h, out, sum);
    }
  }

  // The baseline: each (row, head) pair alone over all its keys, pairs balanced over threads.
  void run_per_head(const int64_t* w, int64_t rows, int64_t start, int64_t cache_rows, int thread,
                    int threads) const {
    const int64_t d = d_.d, heads = d_.heads;
    const float scale = float(d_.scale);
    // Each pair also pays a fixed cost (its query, its output) worth a few keys.
    auto cost = [&](int64_t p) { return d_.keys(start + p / heads, cache_rows) + 8; };
    float* q = scratch_.get(thread);
    float* acc = q + d;
    float* row = acc + d;
    float* scores = row + d;
    share(rows * heads, cost, thread, threads, [&](int64_t begin, int64_t end) {
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
        if (row_) {
          const int64_t stride = d_.kv_heads * d;
          row_({q, k_.data<float>(w) + d_.at(0, g), v_.data<float>(w) + d_.at(0, g), stride, d, keys, block_, scores, acc});
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
    });
  }

  // body(begin, end) over runs of [0, units) that together cover it once: each thread first
  // its balanced part, in halving chunks, then what is left of the others' (cpu::SharedRanges),
  // so a thread slowed by another process holds the call up by a chunk, not by its part.
  template <class Cost, class Body>
  void share(int64_t units, const Cost& cost, int thread, int threads, Body&& body) const {
    cpu::SharedRanges::Starts starts(threads);
    balanced_starts(units, cost, threads, starts.data());
    shared_.run_parts(starts.data(), 1, thread, threads, body);
  }

  // Row j of kv head g of a cache as f32: in place for an f32 cache, else converted into `buffer`.
  const float* cache_row(const cpu::Operand& c, const int64_t* w, int64_t j, int64_t g,
                         float* buffer) const {
    if (c.dtype == f32) return c.data<float>(w) + d_.at(j, g);
    attention::load(c.dtype, c.base, c.offset.get(w) + d_.at(j, g), d_.d, buffer);
    return buffer;
  }

  Dims d_;
  cpu::Operand q_, k_, v_, y_;
  cpu::Operand lengths_;  // segments only
  cpu::Operand positions_, slots_;  // a batched decode only
  cpu::WordRef start_;
  bool per_head_;
  int64_t block_, split_;
  int64_t width_;          // head_dim rounded up to 16
  int64_t rows_per_tile_;  // a prefill tile's rows
  int64_t queries_;        // a tile's query vectors at most: its rows times the heads
  cpu::Scratch scratch_;
  attention::TileFn tile_ = nullptr;         // a vector tile (AVX-512's, else Highway's), where the CPU has one
  attention::TileFn decode_tile_ = nullptr;  // and its build for one query row (Highway's: the same)
  attention::RowFn row_ = nullptr;    // the per-head path's AVX-512 row loop, for f32 caches
#if defined(__x86_64__)
  bool segment_amx_ = false;  // segments on AMX tiles (segment_amx.hpp), at medium
#endif
  // A decode step's partials (per row of a batched decode), and how many of each row's are
  // finished this call.
  float* partials_ = nullptr;
  int64_t finished_rows_ = 1;
  std::unique_ptr<std::atomic<int64_t>[]> finished_;
  mutable cpu::SharedRanges shared_;  // each call's units, shared out among its threads (share())
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
    d_.window = params_.integer("window");
    if (d_.window < 0) value_error("Attention: window is a count of keys (0: no window), not " + params_.str());
    d_.segment = params_.integer("segment");
    if (d_.segment < 0 || (d_.segment > 0 && d_.ctx % d_.segment != 0))
      value_error("Attention: segment is a count of rows dividing ctx (0: causal), not " + params_.str());
    d_.slot_rows = params_.integer("slot_rows");
    if (d_.slot_rows < 0 || (d_.slot_rows > 0 && (d_.ctx % d_.slot_rows != 0 || d_.segment != 0)))
      value_error("Attention: slot_rows is a count of rows dividing ctx, without segments (0: one sequence), not " +
                  params_.str());
  }

  void reference(const RefCall& c) const override {
    const RefOperand &q = c.in[0], &k = c.in[1], &v = c.in[2], &y = c.out[0];
    const int64_t rows = valid_rows(q), d = d_.d;
    const int64_t start = c.scalars.at(0);
    const int64_t cache_rows = std::min(k.valid.at(0), v.valid.at(0));
    std::vector<double> scores, out(static_cast<size_t>(d));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < d_.heads; ++h) {
        const int64_t g = h / d_.group();
        int64_t keys = d_.keys(start + r, cache_rows), first = std::min(d_.first(start + r), keys);
        if (d_.segment > 0)
          std::tie(first, keys) = d_.segment_keys(r, int64_t(c.in.at(3).data[r / d_.segment]), cache_rows);
        if (d_.slot_rows > 0) {
          // Its slot's keys up to its position, as absolute cache rows (none when out of range).
          const auto place = d_.slot_place(int64_t(c.in.at(4).data[r]), int64_t(c.in.at(3).data[r]));
          first = keys = 0;
          if (place) {
            keys = place->first + d_.keys(place->second, d_.slot_rows);
            first = std::min(place->first + d_.first(place->second), keys);
          }
        }
        const float* qr = q.data + (r * d_.heads + h) * d;
        float* yr = y.data + (r * d_.heads + h) * d;
        scores.assign(size_t(keys), 0.0);
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = first; j < keys; ++j) {
          double s = 0;
          for (int64_t i = 0; i < d; ++i) s += double(qr[i]) * double(k.data[d_.at(j, g) + i]);
          scores[size_t(j)] = s * d_.scale;
          top = std::max(top, scores[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = first; j < keys; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - top));
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = first; j < keys; ++j)
          for (int64_t i = 0; i < d; ++i)
            out[size_t(i)] += scores[size_t(j)] * double(v.data[d_.at(j, g) + i]);
        for (int64_t i = 0; i < d; ++i)
          yr[i] = round_to(y.dtype, keys > first ? float(out[size_t(i)] / sum) : 0.0f);
      }
  }

  Tolerance tolerance(Precision p) const override {
    // At medium an encoder's attention may round queries, keys, values and weights to bf16
    // (segment_amx.hpp), and a decode step over q8_0 caches rounds each query to q8_0 blocks
    // (tile_avx512.cpp's int8 scores): outputs of values within +-2 move by up to about 1e-2
    // (the int8 scores' largest in the operator's tests: 6.7e-3). Otherwise attention computes
    // in f32 at every precision.
    if (p == Precision::medium) return {2e-2, 1e-2};
    return {2e-5, 1e-4};
  }

  std::unique_ptr<cpu::Kernel> cpu_kernel(const cpu::KernelArgs& a) const {
    return std::make_unique<Kernel>(d_, a, tunables_);
  }

  Dims d_;
};

}  // namespace

// Records its dispatches on Vulkan (attention_vulkan.cpp).
void record_attention(const Operator& op, const vulkan::KernelArgs& args, vulkan::CommandList& list);

namespace {
// What the kernel's constructor reads to pick its loops (Kernel above), said for the table: the
// per-head rows have an AVX-512 loop over f32 caches only; the grouped tiles want keys and values
// of one dtype; AMX tiles serve an encoder's segments of f32 at medium.
bool per_head(const Attention& op) {
  return op.tunables().text("path") == "per_head" && op.d_.window == 0 && op.d_.segment == 0;
}
std::string refuses_vector(const Operator& o, const cpu::KernelArgs& a, bool avx512) {
  const Attention& op = static_cast<const Attention&>(o);
  const DType k = a.in.at(1).dtype, v = a.in.at(2).dtype;
  if (per_head(op)) {
    if (!avx512) return "the per-head rows have a vector loop for AVX-512 alone";
    if (k != f32 || v != f32) return "the per-head rows read f32 caches only";
    return "";
  }
  if (k != v) return "keys and values of different dtypes";
  const cpu::Features& f = a.features ? *a.features : cpu::Features::host();
  if (!vector_tiles(f, k, v, op.d_.d, a.precision).prefill)
    return "no vector tile for a head_dim of " + std::to_string(op.d_.d) + " over " + std::string(name(k));
  return "";
}
std::string refuses_amx(const Operator& o, const cpu::KernelArgs& a) {
  const Attention& op = static_cast<const Attention&>(o);
  if (op.d_.segment == 0) return "tiles serve an encoder's segments only";
  if (op.d_.window > 0) return "tiles take whole segments: no window";
  if (a.precision != Precision::medium) return "tiles round to bf16: medium only";
  for (const cpu::Operand* x : {&a.in.at(0), &a.in.at(1), &a.in.at(2), &a.out.at(0)})
    if (x->dtype != f32) return "f32 operands only";
  if (op.d_.d % 16 != 0 || op.d_.d > attention::kSegmentAmxMaxDim) return "a head_dim of 16s up to 256 only";
  if (op.d_.segment > attention::kSegmentAmxMaxRows) return "segments of up to 1024 rows only";
  return "";
}
}  // namespace

OpEntry attention_entry() {
  return entry<Attention>(
      kAttention,
      {{cpu::Target::amx, refuses_amx},
       {cpu::Target::avx512, [](const Operator& o, const cpu::KernelArgs& a) { return refuses_vector(o, a, true); }},
       {cpu::Target::avx2, [](const Operator& o, const cpu::KernelArgs& a) { return refuses_vector(o, a, false); }},
       // NEON's tile on SVE processors too (tile_hwy.cpp): the table says neon for what runs.
       {cpu::Target::neon, [](const Operator& o, const cpu::KernelArgs& a) { return refuses_vector(o, a, false); }},
       {cpu::Target::portable}},
      IRON_VULKAN_RECORDER(record_attention));
}

}  // namespace iron::ops
