// Attention: the kernel against its reference (ragged head_dim, grouped heads, bounded rows, a
// per-call start), the reference against hand-computed values, and a graph that writes a KV cache
// at a per-call position then attends, compiled and checked against reference().
#include "ops/feature_sets.hpp"
#include "iron/iron.hpp"
#include "ops/gemm_test_util.hpp"
#include "ops/op_harness.hpp"

namespace iron::test {
namespace {

namespace F = iron::functional;

Case attention_case(int64_t rows, int64_t valid_rows, int64_t heads, int64_t kv_heads, int64_t d,
                    int64_t ctx, int64_t start, DType cache, DType out) {
  Case c;
  c.op = "Attention";
  c.params = {{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", d}, {"ctx", ctx}};
  c.in = {ranged(dense({rows, heads, d}, out, {valid_rows, heads, d}), -2, 2),
          ranged(dense({ctx, kv_heads, d}, cache), -2, 2), dense({ctx, kv_heads, d}, cache)};
  c.out = {dense({rows, heads, d}, out, {valid_rows, heads, d})};
  c.scalars = {start};
  return c;
}

TEST(Attention, SlidingWindowOnEveryDevice) {
  for (int64_t start : {0, 3, 30}) {
    Case c = attention_case(6, 5, 4, 2, 16, 48, start, f32, f32);
    c.params = {{"heads", int64_t(4)}, {"kv_heads", int64_t(2)}, {"head_dim", int64_t(16)}, {"ctx", int64_t(48)},
                {"window", int64_t(7)}};
    run_case(c);
  }
}

TEST(Attention, KernelMatchesReference) {
  uint32_t seed = 200;
  struct Rows {
    int64_t rows, valid;
  };
  for (int64_t d : {8, 64})
    for (Rows r : {Rows{1, 1}, Rows{5, 3}})
      for (int64_t start : {0, 7})
        for (DType cache : {f32, bf16, f16, DType::q8_0})
          for (int64_t block : {32, 5}) {
            DType out = cache == bf16 ? bf16 : f32;
            Case c = attention_case(r.rows, r.valid, 9, 3, d, 32, start, cache, out);
            c.tunables = {{"block", block}};
            c.seed = seed++;
            Result res = run_case(c);
            // Rows past the bound are not written.
            for (size_t e = size_t(r.valid * 9 * d); e < res.two_threads[0].size(); ++e)
              ASSERT_EQ(res.two_threads[0][e], 5.0f);
          }
}

// Long enough for whole runs of sixteen keys (the vector kernel sums their products together)
// beside a ragged rest, for head sizes of whole and part registers.
TEST(Attention, ManyKeysKernelMatchesReference) {
  uint32_t seed = 900;
  for (int64_t d : {64, 72, 128})
    for (int64_t start : {0, 50})
      for (int64_t block : {32, 64, 128}) {
        Case c = attention_case(5, 5, 9, 3, d, 96, start, f32, f32);
        c.tunables = {{"block", block}};
        c.seed = seed++;
        run_case(c);
      }
}

// ---- the kernel run directly: every dispatch path, cache dtype and thread count ---------------

struct Shape3 {
  int64_t heads, kv_heads, d;
};

// One call of an Attention kernel on f32 queries and caches of `cache` (the test's f32 values
// rounded or quantised into it; the reference reads them back), with `rows` query rows from
// position `start` and the caches bounded to `cache_rows` rows this call.
struct Direct {
  Shape3 s;
  int64_t ctx, rows, start, cache_rows;
  DType cache;
  Fields tunables;
  int64_t window = 0;  // a sliding window's keys (0: none)
  int64_t segment = 0;  // segments of rows (then rows == ctx), each `lengths` long
  std::vector<int32_t> lengths = {};
  Precision precision = Precision::highest;

  std::string str() const {
    return "heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " d " + std::to_string(s.d) +
           " ctx " + std::to_string(ctx) + " rows " + std::to_string(rows) + " start " + std::to_string(start) +
           " cache rows " + std::to_string(cache_rows) + " " + std::string(name(cache)) + " window " +
           std::to_string(window) + " segment " + std::to_string(segment) + " " + tunables.str() + " at " +
           std::string(name(precision));
  }
};

// Runs `c` with `features` as 1 to 4 threads against reference(), and on every thread of the
// pool together; every thread count gives the same bits (the split of a decode step's keys
// depends on the keys alone). The pool is made with four threads where this test is the
// process's first to ask for it (as ctest runs each test), whatever this machine has.
// Returns the results.
std::vector<float> check_direct(const Direct& c, const cpu::Features& features, uint32_t seed) {
  SCOPED_TRACE(c.str() + " on " + features.str());
  const int pool = cpu::ThreadPool::shared(4).size();
  std::shared_ptr<Operator> op = catalog_entry("Attention")
                                     .make({{"heads", c.s.heads},
                                            {"kv_heads", c.s.kv_heads},
                                            {"head_dim", c.s.d},
                                            {"ctx", c.ctx},
                                            {"window", c.window},
                                            {"segment", c.segment}},
                                           c.tunables);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  auto random = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& f : x) f = u(rng);
    return x;
  };
  const Shape qs{c.rows, c.s.heads, c.s.d}, cs{c.ctx, c.s.kv_heads, c.s.d};
  std::vector<float> q = random(element_count(qs)), y(q.size(), 7.0f), want(q.size(), 7.0f);
  // Each cache in its dtype, and as the reference sees it.
  std::vector<std::vector<char>> bytes;
  std::vector<std::vector<float>> seen;
  for (int k = 0; k < 2; ++k) {
    std::vector<float> x = random(element_count(cs));
    bytes.emplace_back(size_t(storage_bytes(c.cache, element_count(cs))));
    from_f32(c.cache, x.data(), bytes.back().data(), element_count(cs));
    seen.emplace_back(x.size());
    to_f32(c.cache, bytes.back().data(), seen.back().data(), element_count(cs));
  }
  // Words: the query rows, the caches' rows, the start.
  const int64_t words[3] = {c.rows, c.cache_rows, c.start};
  cpu::KernelArgs args;
  args.in = {gemm_testing::operand(f32, qs, reinterpret_cast<char*>(q.data()), {0, 0}),
             gemm_testing::operand(c.cache, cs, bytes[0].data(), {1, 0}),
             gemm_testing::operand(c.cache, cs, bytes[1].data(), {1, 0})};
  args.out = {gemm_testing::operand(f32, qs, reinterpret_cast<char*>(y.data()), {0, 0})};
  args.scalars = {{2, 0}};
  std::vector<int32_t> lengths = c.lengths;
  std::vector<float> lengths_seen(lengths.begin(), lengths.end());
  const Shape ls{int64_t(lengths.size())};
  if (c.segment > 0) args.in.push_back(cpu::dense_operand(i32, ls, reinterpret_cast<char*>(lengths.data())));
  args.features = &features;
  args.precision = c.precision;
  std::unique_ptr<cpu::Kernel> kernel = cpu::kernels().make(*op, args);

  RefCall call;
  call.in = {{q.data(), qs, qs, f32}, {seen[0].data(), cs, {c.cache_rows, c.s.kv_heads, c.s.d}, c.cache},
             {seen[1].data(), cs, {c.cache_rows, c.s.kv_heads, c.s.d}, c.cache}};
  if (c.segment > 0) call.in.push_back({lengths_seen.data(), ls, ls, i32});
  call.out = {{want.data(), qs, qs, f32}};
  call.scalars = {c.start};
  op->reference(call);
  const Tolerance tol = op->tolerance(c.precision);

  std::vector<float> first;
  auto check = [&](int threads, bool together) {
    SCOPED_TRACE(std::to_string(threads) + (together ? " threads together" : " threads' shares in turn"));
    std::fill(y.begin(), y.end(), 7.0f);
    if (together) {
      cpu::run_kernel(*kernel, words, threads);
    } else {
      // Each share on this thread in turn: any count the pool has scratch for, without a run
      // that leaves workers out (their reading of the pool's state races the next run's).
      for (int t = 0; t < threads; ++t) kernel->run(words, t, threads);
    }
    int failures = 0;
    for (size_t e = 0; e < y.size() && failures < 5; ++e)
      if (!(std::abs(double(y[e]) - want[e]) <= tol.atol + tol.rtol * std::abs(want[e])))
        ADD_FAILURE() << "element " << e << ": kernel " << y[e] << ", reference " << want[e] << " (" << ++failures
                      << ")";
    if (first.empty())
      first = y;
    else
      ASSERT_EQ(y, first) << "the results changed with the thread count";
  };
  for (int threads = 1; threads <= std::min(pool, 4); ++threads) check(threads, false);
  check(pool, true);
  return first;
}

using test::feature_sets;

const DType kCaches[] = {f32, f16, bf16, DType::q8_0};

// Shapes: SmolLM2's (groups of 3, head_dim 64), Gemma 3's (4 heads over 1, head_dim 256), groups
// of 1 and 8, head_dim 80 (q8_0 rows that start inside a block) and 72 (a part register).
const Shape3 kShapes[] = {{9, 3, 64}, {4, 1, 256}, {2, 2, 64}, {8, 1, 80}, {6, 2, 72}};

TEST(Attention, DecodeSplitsTheKeysAcrossThreads) {
  uint32_t seed = 1000;
  for (const cpu::Features& f : feature_sets())
    for (const Shape3& s : kShapes)
      for (DType cache : kCaches) {
        // One key, fewer keys than threads, part of a block, several partials of the split (64
        // keys each at least here), one more than a whole number of blocks, the cache's bound.
        for (int64_t start : {0, 2, 13, 200, 256, 300})
          check_direct({s, 320, 1, start, 320, cache, {{"split", int64_t(64)}}}, f, seed++);
        check_direct({s, 320, 1, 300, 97, cache, {{"split", int64_t(64)}}}, f, seed++);
        check_direct({s, 320, 1, 319, 320, cache, {}}, f, seed++);
      }
}

TEST(Attention, DecodeOfManyPartials) {
  // More keys than 32 partials of the split take: the partials grow instead.
  uint32_t seed = 1100;
  for (const cpu::Features& f : feature_sets())
    check_direct({{9, 3, 64}, 3000, 1, 2999, 3000, f16, {{"split", int64_t(64)}}}, f, seed++);
}

TEST(Attention, PrefillTilesShareKeysAcrossRowsAndHeads) {
  uint32_t seed = 1200;
  for (const cpu::Features& f : feature_sets())
    for (const Shape3& s : kShapes)
      for (DType cache : kCaches) {
        // From the cache's start, from inside it, past the cache's bound (later rows see no
        // more keys), and tiles of one row up to several rows.
        check_direct({s, 96, 37, 0, 96, cache, {}}, f, seed++);
        check_direct({s, 96, 11, 50, 96, cache, {{"tile", int64_t(4)}}}, f, seed++);
        check_direct({s, 96, 9, 40, 45, cache, {{"tile", int64_t(32)}}}, f, seed++);
        check_direct({s, 96, 3, 0, 0, cache, {}}, f, seed++);  // no keys: zeros
      }
}

// Head sizes AVX-512's own tile has none for: 160 (whole vectors of 16: Highway's AVX-512 copy of
// its tile) and 200 (whole vectors of 8 alone: its AVX2 copy, on AVX-512 processors too), and 36
// (whole vectors of 4: NEON's copy on ARM, the portable loops on x86). Decode and prefill.
TEST(Attention, HeadSizesWithoutAnAvx512TileTakeHighwaysTile) {
  uint32_t seed = 1300;
  for (const cpu::Features& f : feature_sets())
    for (int64_t d : {160, 200, 36})
      for (DType cache : kCaches) {
        const Shape3 s{6, 2, d};
        check_direct({s, 80, 1, 70, 80, cache, {{"split", int64_t(32)}}}, f, seed++);
        check_direct({s, 80, 13, 20, 80, cache, {{"tile", int64_t(12)}}}, f, seed++);
      }
}

// Gemma's local layers: each row attends to the last `window` positions up to its own. Decode
// windows that start mid-block and cut across partials, prefill tiles whose rows' windows begin
// at different keys, a window wider than what the cache holds, and a window of one key.
TEST(Attention, SlidingWindowReadsOnlyItsKeys) {
  uint32_t seed = 1400;
  for (const cpu::Features& f : feature_sets())
    for (const Shape3& s : {Shape3{4, 1, 256}, Shape3{9, 3, 64}})
      for (DType cache : kCaches) {
        for (int64_t start : {0, 5, 40, 250, 319}) {
          Direct d{s, 320, 1, start, 320, cache, {{"split", int64_t(64)}}, 37};
          check_direct(d, f, seed++);
        }
        check_direct({s, 320, 1, 300, 320, cache, {}, 512}, f, seed++);
        check_direct({s, 320, 1, 100, 320, cache, {}, 1}, f, seed++);
        check_direct({s, 96, 37, 20, 96, cache, {}, 16}, f, seed++);
        check_direct({s, 96, 11, 50, 96, cache, {{"tile", int64_t(4)}}, 23}, f, seed++);
        check_direct({s, 96, 9, 40, 45, cache, {{"tile", int64_t(32)}, {"path", std::string("per_head")}}, 8}, f,
                     seed++);
      }
}

// Segments on every dispatch path and thread count: MiniLM's heads (12 of 32), grouped heads,
// a ragged head_dim, segments of one tile and of several, lengths from 0 to past the segment.
TEST(Attention, SegmentsOnEveryPath) {
  uint32_t seed = 1500;
  for (const cpu::Features& f : feature_sets())
    for (const Shape3& s : {Shape3{12, 12, 32}, Shape3{9, 3, 64}, Shape3{6, 2, 72}})
      for (DType cache : {f32, bf16}) {
        check_direct({s, 96, 96, 0, 96, cache, {}, 0, 32, {32, 17, 1}}, f, seed++);
        check_direct({s, 96, 96, 0, 96, cache, {{"tile", int64_t(16)}}, 0, 48, {0, 45}}, f, seed++);
        check_direct({s, 96, 96, 0, 90, cache, {}, 0, 8, {8, 3, 0, 5, 99, -1, 8, 2, 7, 8, 1, 6}}, f, seed++);
        // Bidirectional windows: shorter than a tile, longer than one, cut by the segment's end
        // and by the keys bounded this call.
        check_direct({s, 96, 96, 0, 96, cache, {}, 5, 32, {32, 17, 1}}, f, seed++);
        check_direct({s, 96, 96, 0, 96, cache, {{"tile", int64_t(16)}}, 20, 48, {48, 45}}, f, seed++);
        check_direct({s, 96, 96, 0, 70, cache, {}, 3, 24, {24, 2, 24, 11}}, f, seed++);
      }
}

// At medium, segments of f32 caches on a host with AMX take the bf16 tiles (segment_amx.hpp):
// against the reference at medium's tolerance on every path (AMX, and AVX-512's, AVX2's and the
// portable f32 tiles, which medium leaves as they are), for MiniLM's heads at 128 rows, segments
// of 256, grouped heads, head_dim 16 and 48 (padded to 32 and 64), keys not a multiple of 16 or
// 32, empty and one-row segments, lengths past the segment, and keys bounded per call.
TEST(Attention, SegmentsAtMediumOnEveryPath) {
  uint32_t seed = 1700;
  std::vector<cpu::Features> sets = feature_sets();
  const cpu::Features& host = cpu::Features::host();
  if (host.amx_bf16) sets.push_back(host.limited_to("avx512"));  // medium without AMX: the f32 tiles
  for (const cpu::Features& f : sets) {
    auto medium = [&](Direct c) {
      c.precision = Precision::medium;
      const std::vector<float> y = check_direct(c, f, seed);
      c.precision = Precision::highest;
      const std::vector<float> exact = check_direct(c, f, seed++);
      // AMX rounds to bf16, so its results differ from the f32 tiles': this runs that path.
      if (f.amx_bf16) {
        EXPECT_NE(y, exact) << c.str() << ": medium gave highest's bits on AMX";
      }
    };
    medium({{12, 12, 32}, 256, 256, 0, 256, f32, {}, 0, 128, {128, 77}});
    medium({{2, 2, 32}, 256, 256, 0, 256, f32, {}, 0, 256, {250}});
    medium({{4, 2, 16}, 96, 96, 0, 96, f32, {}, 0, 16, {16, 5, 0, 1, 40, -2}});
    medium({{3, 1, 48}, 120, 120, 0, 120, f32, {}, 0, 40, {40, 33, 17}});
    medium({{12, 12, 32}, 128, 128, 0, 90, f32, {}, 0, 64, {64, 64}});  // keys cut this call
  }
}

// At medium, a decode step over q8_0 caches on a host with AVX512-VNNI takes int8 scores (the
// query rounded to q8_0 blocks, tile_avx512.cpp): against the reference at medium's tolerance,
// the same bits on every thread count, and not highest's bits (so that path ran). Without VNNI
// (the host with it taken away, AVX2, portable) medium keeps the f32 scores: highest's bits.
// SmolLM2's and Gemma 3's shapes, head_dim 128, and 80 (rows inside blocks: the f32 scores);
// one key, part of a block, several partials, a sliding window.
TEST(Attention, DecodeAtMediumTakesInt8ScoresOnQ8_0) {
  uint32_t seed = 1800;
  std::vector<cpu::Features> sets = feature_sets();
  const cpu::Features& host = cpu::Features::host();
  if (host.avx512vnni) {
    cpu::Features without = host;
    without.avx512vnni = false;
    sets.push_back(without);
  }
  for (const cpu::Features& f : sets)
    for (const Shape3& s : {Shape3{9, 3, 64}, Shape3{4, 1, 256}, Shape3{4, 2, 128}, Shape3{8, 1, 80}})
      for (int64_t start : {0, 13, 300})
        for (int64_t window : {int64_t(0), int64_t(37)}) {
          Direct c{s, 320, 1, start, 320, DType::q8_0, {{"split", int64_t(64)}}, window};
          c.precision = Precision::medium;
          const std::vector<float> y = check_direct(c, f, seed);
          c.precision = Precision::highest;
          const std::vector<float> exact = check_direct(c, f, seed++);
          const bool int8 = f.avx512vnni && f.avx512f && f.avx512bw && f.avx512vl && s.d % 64 == 0;
          if (int8 && start > 0)
            EXPECT_NE(y, exact) << c.str() << ": medium gave highest's bits with VNNI";
          else
            EXPECT_EQ(y, exact) << c.str() << ": medium changed the f32 scores";
        }
}

TEST(Attention, PerHeadPathMatchesReference) {
  uint32_t seed = 1300;
  for (const cpu::Features& f : feature_sets())
    for (DType cache : kCaches) {
      check_direct({{9, 3, 64}, 96, 1, 70, 96, cache, {{"path", std::string("per_head")}}}, f, seed++);
      check_direct({{9, 3, 64}, 96, 7, 20, 96, cache, {{"path", std::string("per_head")}}}, f, seed++);
    }
}

TEST(Attention, WindowHeldToTheCache) {
  // Positions 30, 31, 32 in a cache of 32 rows: the last row attends to all 32 keys.
  Case end = attention_case(5, 3, 4, 2, 16, 32, 30, f32, f32);
  run_case(end);
  // A cache bounded to its first 20 rows this call: no key past them takes part, so rows 20..31
  // of the caches may hold anything.
  Case bounded = attention_case(4, 4, 4, 1, 16, 32, 17, bf16, bf16);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int k = 0; k < 3; ++k) {
    bounded.in[size_t(k)].values.resize(size_t(element_count(bounded.in[size_t(k)].shape)));
    for (float& x : bounded.in[size_t(k)].values) x = u(rng);
  }
  bounded.in[1].valid = {20, 1, 16};
  bounded.in[2].valid = {20, 1, 16};
  Result a = run_case(bounded);
  for (int k = 1; k < 3; ++k)
    for (size_t e = 20 * 16; e < 32 * 16; ++e) bounded.in[size_t(k)].values[e] = 100;
  Result b = run_case(bounded);
  EXPECT_EQ(a.ref[0], b.ref[0]);
  EXPECT_EQ(a.two_threads[0], b.two_threads[0]);
}

TEST(Attention, OneQueryTwoKeys) {
  // q = [1, 0], keys [1, 0] and [0, 1] (scores 1 and 0 at scale 1), values [1, 2] and [3, 4].
  // At start 1: weights e/(e+1) and 1/(e+1), so y = [1, 2] + 2/(e+1) * [1, 1].
  Case c;
  c.op = "Attention";
  c.params = {{"heads", int64_t(1)},
              {"kv_heads", int64_t(1)},
              {"head_dim", int64_t(2)},
              {"ctx", int64_t(2)},
              {"scale", 1.0}};
  c.in = {given({1, 1, 2}, {1, 0}), given({2, 1, 2}, {1, 0, 0, 1}), given({2, 1, 2}, {1, 2, 3, 4})};
  c.out = {dense({1, 1, 2})};
  c.scalars = {1};
  const double w = 0.2689414213699951;  // 1/(e+1)
  expect_near(run_case(c).ref[0], {1 + 2 * w, 2 + 2 * w}, 1e-7);
  c.scalars = {0};  // position 0 sees only the first key
  expect_near(run_case(c).ref[0], {1, 2}, 0);
  // The default scale 1/sqrt(2): weights of scores 1/sqrt(2) and 0.
  c.params = {{"heads", int64_t(1)},
              {"kv_heads", int64_t(1)},
              {"head_dim", int64_t(2)},
              {"ctx", int64_t(2)}};
  c.scalars = {1};
  const double w2 = 1 / (std::exp(1 / std::sqrt(2.0)) + 1);
  expect_near(run_case(c).ref[0], {1 + 2 * w2, 2 + 2 * w2}, 1e-7);
}

TEST(Attention, GroupedHeadsReadTheirKvHead) {
  // One key: each head's output is its kv head's value row. Heads 0, 1 read kv head 0; 2, 3 head 1.
  Case c;
  c.op = "Attention";
  c.params = {{"heads", int64_t(4)},
              {"kv_heads", int64_t(2)},
              {"head_dim", int64_t(1)},
              {"ctx", int64_t(3)}};
  c.in = {given({1, 4, 1}, {1, -1, 2, 0}), given({3, 2, 1}, {1, 1, 9, 9, 9, 9}),
          given({3, 2, 1}, {10, 20, 30, 40, 50, 60})};
  c.out = {dense({1, 4, 1})};
  c.scalars = {0};
  expect_near(run_case(c).ref[0], {10, 10, 20, 20}, 0);
}

// ---- segments: an encoder's bidirectional attention over a padded batch ----------------------

Case segment_case(int64_t segment, std::vector<float> lengths, int64_t heads, int64_t kv_heads, int64_t d,
                  int64_t valid_rows = -1) {
  const int64_t batch = int64_t(lengths.size()), rows = segment * batch;
  Case c;
  c.op = "Attention";
  c.params = {{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", d}, {"ctx", rows}, {"segment", segment}};
  const Shape valid = valid_rows < 0 ? Shape{} : Shape{valid_rows, heads, d};
  c.in = {ranged(dense({rows, heads, d}, f32, valid), -2, 2), ranged(dense({rows, kv_heads, d}), -2, 2),
          dense({rows, kv_heads, d}), given({batch}, std::move(lengths), i32)};
  c.out = {dense({rows, heads, d}, f32, valid)};
  c.scalars = {0};
  return c;
}

TEST(Attention, SegmentsMatchReference) {
  uint32_t seed = 1300;
  // Full, partial, one-row and empty segments; MiniLM's 12 heads of 32; segments longer than a
  // tile (a segmented tile takes at least 16 rows: 32-row segments are two); grouped heads;
  // lengths past the segment or negative are held to it.
  for (const Case& base : {segment_case(8, {8, 3, 1, 0}, 4, 2, 16), segment_case(16, {16, 11}, 12, 12, 32),
                           segment_case(32, {29, 32, 7}, 12, 12, 32), segment_case(8, {40, -3}, 4, 4, 8),
                           segment_case(8, {5, 8, 2}, 4, 2, 16, /*valid_rows=*/13)}) {
    for (int64_t tile : {16, 64}) {
      Case c = base;
      c.tunables = {{"tile", tile}};
      c.seed = seed++;
      Result res = run_case(c);
      // Padding rows are zeros; a segment's valid rows are not.
      const int64_t segment = c.params.integer("segment"), row = c.params.integer("heads") * c.params.integer("head_dim");
      const std::vector<float>& lengths = c.in[3].values;
      const int64_t valid = c.in[0].valid.empty() ? segment * int64_t(lengths.size()) : c.in[0].valid[0];
      for (int64_t r = 0; r < valid; ++r) {
        const int64_t length = std::clamp<int64_t>(int64_t(lengths[size_t(r / segment)]), 0, segment);
        const bool padding = r % segment >= length;
        float largest = 0;
        for (int64_t e = 0; e < row; ++e) largest = std::max(largest, std::abs(res.two_threads[0][size_t(r * row + e)]));
        EXPECT_EQ(largest == 0, padding) << "row " << r;
      }
    }
  }
}

// The op at medium through the harness (the host's path: AMX where it has it), query rows
// bounded per call: rows past the bound are not written.
TEST(Attention, SegmentsAtMediumWithRowsBoundedPerCall) {
  Case c = segment_case(64, {64, 50}, 12, 12, 32, /*valid_rows=*/100);
  c.precision = Precision::medium;
  c.seed = 1800;
  run_case(c);
}

TEST(Attention, SegmentRowsSeeTheirWholeSegmentOnly) {
  // Two segments of two rows, one head of one dimension, scale 1: row 0 attends to rows 0 and 1
  // (bidirectional: row 0 reads row 1's key too), row 2 to row 2 alone (length 1), row 3 is
  // padding. q = 1 everywhere, keys 1 and 0: weights e/(e+1) and 1/(e+1) on values 10 and 20.
  Case c;
  c.op = "Attention";
  c.params = {{"heads", int64_t(1)}, {"kv_heads", int64_t(1)}, {"head_dim", int64_t(1)}, {"ctx", int64_t(4)},
              {"scale", 1.0}, {"segment", int64_t(2)}};
  c.in = {given({4, 1, 1}, {1, 1, 1, 1}), given({4, 1, 1}, {1, 0, 5, 5}), given({4, 1, 1}, {10, 20, 30, 40}),
          given({2}, {2, 1}, i32)};
  c.out = {dense({4, 1, 1})};
  c.scalars = {0};
  const double w = 0.2689414213699951;  // 1/(e+1)
  expect_near(run_case(c).ref[0], {10 + 10 * w, 10 + 10 * w, 30, 0}, 1e-6);
}

// A bidirectional window of 2: each row sees itself and one row either way. Queries of zeros
// weigh every key it sees alike, so each output is the mean of the values it sees: segment 0
// (values 10 20 30 40, all valid) gives 15 20 30 35; segment 1 (1 2 3, then padding) gives
// 1.5 2 2.5 and a zero row.
TEST(Attention, SegmentWindowSeesRowsLessThanItFromEachRow) {
  Case c;
  c.op = "Attention";
  c.params = {{"heads", int64_t(1)}, {"kv_heads", int64_t(1)}, {"head_dim", int64_t(1)}, {"ctx", int64_t(8)},
              {"scale", 1.0}, {"segment", int64_t(4)}, {"window", int64_t(2)}};
  c.in = {given({8, 1, 1}, std::vector<float>(8, 0.0f)), given({8, 1, 1}, {1, -1, 2, 0, 3, 1, 4, 2}),
          given({8, 1, 1}, {10, 20, 30, 40, 1, 2, 3, 9}), given({2}, {4, 3}, i32)};
  c.out = {dense({8, 1, 1})};
  c.scalars = {0};
  expect_near(run_case(c).ref[0], {15, 20, 30, 35, 1.5, 2, 2.5, 0}, 1e-6);
}

TEST(Attention, SegmentsRefuseBadShapes) {
  const auto make = [](Fields p) { return catalog_entry("Attention").make(std::move(p), {}); };
  const Fields base{{"heads", int64_t(2)}, {"kv_heads", int64_t(2)}, {"head_dim", int64_t(8)}, {"ctx", int64_t(12)}};
  Fields ragged = base, negative = base;
  ragged.set("segment", int64_t(5));  // does not divide ctx
  negative.set("segment", int64_t(4));
  negative.set("window", int64_t(-3));
  EXPECT_THROW(make(ragged), Error);
  EXPECT_THROW(make(negative), Error);
}

TEST(Attention, RefusesBadShapes) {
  EXPECT_THROW(catalog_entry("Attention")
                   .make({{"heads", int64_t(4)},
                          {"kv_heads", int64_t(3)},
                          {"head_dim", int64_t(8)},
                          {"ctx", int64_t(4)}},
                         {}),
               Error);
}

// ---- a graph: write k and v rows into State caches at a per-call position, then attend -------

constexpr int64_t kCtx = 16, kHeads = 4, kKvHeads = 2, kD = 8, kRows = 4;

struct CachedAttention : Graph {
  explicit CachedAttention(DType cache_dtype) : dtype(cache_dtype) {}
  DType dtype;
  Input q = input("q");  // (rows, heads, head_dim)
  Input k = input("k");  // (rows, kv_heads, head_dim)
  Input v = input("v");
  Scratchpad position = scratchpad("position");
  Scratchpad rows = scratchpad("rows");
  State k_cache = state("k_cache", {kCtx, kKvHeads, kD}, dtype);
  State v_cache = state("v_cache", {kCtx, kKvHeads, kD}, dtype);

  // cache[position : position + R] = x[:rows], through a view of every window of R rows.
  void write(const State& cache, const Input& x) {
    const int64_t R = x.shape()[0], W = kKvHeads * kD;
    Handle windows =
        cache.handle().at(AccessPattern{0, {kCtx - R + 1, R, W}, {W, W, 1}}, {kCtx - R + 1, R, W});
    windows[at(position)].assign(x.handle().reshape({R, W})[upto(rows)]);
  }

  Outputs body() override {
    write(k_cache, k);
    write(v_cache, v);
    return {F::attention(q[upto(rows)], k_cache, v_cache, position)};
  }
};

std::vector<Tensor> random_inputs(uint32_t seed, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  auto make = [&](Shape s) {
    std::vector<float> x(size_t(element_count(s)));
    for (float& f : x) f = u(rng);
    return Tensor::from(x, s, dtype);
  };
  return {make({kRows, kHeads, kD}), make({kRows, kKvHeads, kD}), make({kRows, kKvHeads, kD})};
}

TEST(Attention, GraphWritesTheCacheThenAttends) {
  // Inputs, caches and output all f32, or all bf16.
  for (DType cache : {f32, bf16})
    for (bool check : {false, true}) {
      CachedAttention g(cache);
      Shapes shapes{{"q", InputSpec({kRows, kHeads, kD}, cache)},
                    {"k", InputSpec({kRows, kKvHeads, kD}, cache)},
                    {"v", InputSpec({kRows, kKvHeads, kD}, cache)}};
      CompiledGraph& image = g.compile(shapes, {.check = check});
      struct Call {
        int64_t position, rows;
      };
      uint32_t seed = 300;
      std::vector<float> first_k;
      for (Call call : {Call{0, 3}, Call{3, 1}, Call{4, 4}, Call{8, 2}, Call{10, 1}}) {
        SCOPED_TRACE("position " + std::to_string(call.position) + ", rows " +
                     std::to_string(call.rows) + (check ? ", checked" : ""));
        std::vector<Tensor> in = random_inputs(seed++, cache);
        if (first_k.empty()) first_k = in[1].to_floats();
        std::vector<ValueArg> values{{"position", call.position}, {"rows", call.rows}};
        std::vector<Tensor> got;
        ASSERT_NO_THROW({
          const auto& out = image(in, values);
          got = {out.outputs[0].to(f32)};
        });
        std::vector<Tensor> want = g.reference(in, values);
        ASSERT_EQ(got[0].shape(), (Shape{call.rows, kHeads, kD}));
        ASSERT_EQ(want[0].shape(), got[0].shape());
        auto a = got[0].to_floats(), b = want[0].to_floats();
        const double rounding = cache == bf16 ? 2.0 / 256 : 0;
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_NEAR(a[i], b[i], 2e-5 + (1e-4 + rounding) * std::abs(b[i])) << i;
      }
      // The cache holds the 11 rows written (the first call's 3 rows first), the rest still zero.
      Tensor kc = image.read(g.k_cache).to(f32);
      auto kv = kc.to_floats();
      for (size_t e = 0; e < size_t(3 * kKvHeads * kD); ++e) ASSERT_EQ(kv[e], first_k[e]);
      for (int64_t e = 11 * kKvHeads * kD; e < kCtx * kKvHeads * kD; ++e)
        ASSERT_EQ(kv[size_t(e)], 0.0f);
    }
}

TEST(Attention, GraphRefusesAStartPastTheCache) {
  struct Bad : Graph {
    Input q = input("q");
    State kc = state("kc", {4, 1, 2});
    Scratchpad start = scratchpad("start");
    Outputs body() override { return {F::attention(q, kc, kc, start)}; }
  } g;
  CompiledGraph& image = g.compile({{"q", {1, 2, 2}}});
  Tensor q = Tensor::zeros({1, 2, 2}, f32);
  EXPECT_NO_THROW(image({q}, {{"start", 3}}));
  EXPECT_THROW(image({q}, {{"start", 4}}), Error);
}

}  // namespace
}  // namespace iron::test
