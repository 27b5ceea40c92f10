// The int8-activation path of ProjectionGEMM at Precision::medium (q4_0 / q4_1 / q5_0 / q5_1 /
// q8_0 / q4_k / q5_k / q6_k weights rearranged 16 rows to a load), on each loop the host runs
// (AVX-512 with VNNI, AVX2 with vpmaddubsw), against the op's reference within
// tolerance(medium), for one row and many; the loops against each other; the layout itself
// against the source blocks; and the ops and precisions that must never take it (their results
// equal the f32 path's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/operator.hpp"
#include "ops/gemm/kernels.hpp"
#include "ops/gemm_test_util.hpp"
#include "ops/op.hpp"
#include "sanitized.hpp"

namespace iron {
namespace {

using gemm_testing::operand;
using gemm_testing::random_weight;

struct Int8Case {
  std::string op = "ProjectionGEMM";  // or GEMV
  DType w = DType::q4_1;
  int64_t rows = 1, valid = 1, k = 64, n = 19;
  std::string epilogue = "none";
  Precision precision = Precision::medium;
  bool residual = false;
  bool gaussian = false;  // x ~ N(0, 1) instead of U(-1, 1)
  std::vector<float> x;   // x itself (rows x k), where not empty
};

std::string describe(const Int8Case& c) {
  return c.op + " w=" + std::string(name(c.w)) + " rows=" + std::to_string(c.rows) +
         " valid=" + std::to_string(c.valid) + " k=" + std::to_string(c.k) +
         " n=" + std::to_string(c.n) + " " + c.epilogue + " " + std::string(name(c.precision)) +
         (c.residual ? " residual" : "") + (c.gaussian ? " gaussian" : "");
}

// The case's outputs (rows x n, f32) from `features` on `threads` threads, and the reference.
struct Outcome {
  std::vector<float> got1, got2, ref;
  Tolerance tol;
};
Outcome run(const Int8Case& c, const cpu::Features& features) {
  cpu::ThreadPool::shared(2);
  Fields params{{"K", c.k}, {"N", c.n}, {"residual", c.residual}};
  if (c.op != "GEMV") {
    params.set("M", c.rows);
    params.set("b_col_maj", true);
    params.set("precision", std::string(name(c.precision)));
    params.set("epilogue", c.epilogue);
  }
  std::shared_ptr<Operator> op = catalog_entry(c.op).make(params, {});

  std::mt19937 rng(uint32_t(c.k * 131 + c.n * 7 + c.rows));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> a(size_t(c.rows * c.k)), r(size_t(c.rows * c.n));
  for (auto& x : a) x = c.gaussian ? g(rng) : u(rng);
  if (!c.x.empty()) a = c.x;
  for (auto& x : r) x = u(rng);
  std::vector<char> w = random_weight(c.w, c.n, c.k, uint32_t(c.n + c.k));
  std::vector<float> w_ref(size_t(c.n * c.k));
  to_f32(c.w, w.data(), w_ref.data(), c.n * c.k);

  const bool gemv_shape = c.op == "GEMV";
  Shape a_shape = gemv_shape ? Shape{c.k} : Shape{c.rows, c.k};
  Shape y_shape = gemv_shape ? Shape{c.n} : Shape{c.rows, c.n};
  std::vector<float> y(size_t(c.rows * c.n));
  cpu::KernelArgs args;
  args.in = {operand(f32, a_shape, reinterpret_cast<char*>(a.data()), {0, 0}),
             operand(c.w, {c.n, c.k}, w.data(), {-1, c.n})};
  args.in[1].prepared = std::make_shared<PreparedForms>();  // a weight: it may be rearranged
  if (c.residual)
    args.in.push_back(operand(f32, y_shape, reinterpret_cast<char*>(r.data()), {0, 0}));
  args.out = {operand(f32, y_shape, reinterpret_cast<char*>(y.data()), {0, 0})};
  args.precision = c.precision;
  args.features = &features;
  std::unique_ptr<cpu::Kernel> kernel = cpu::kernels().make(*op, args);

  Outcome o;
  o.ref.assign(size_t(c.rows * c.n), 0.0f);
  RefCall call;
  call.in = {{a.data(), a_shape, {c.valid, c.k}, f32}, {w_ref.data(), {c.n, c.k}, {c.n, c.k}, c.w}};
  if (c.residual) call.in.push_back({r.data(), y_shape, {c.valid, c.n}, f32});
  call.out = {{o.ref.data(), y_shape, {c.valid, c.n}, f32}};
  if (gemv_shape) {
    call.in[0].valid = {c.k};
    call.out[0].valid = {c.n};
    if (c.residual) call.in[2].valid = {c.n};
  }
  op->reference(call);
  o.tol = op->tolerance(c.precision);

  const int64_t words[1] = {c.valid};
  for (int threads : {1, 2}) {
    std::fill(y.begin(), y.end(), 12345.0f);
    cpu::run_kernel(*kernel, words, threads);
    (threads == 1 ? o.got1 : o.got2) = y;
  }
  return o;
}

bool has_vnni() {
  const cpu::Features& h = cpu::Features::host();
  return h.avx512f && h.avx512bw && h.avx512vl && h.avx512dq && h.fma && h.f16c && h.avx512vnni;
}
cpu::Features without_vnni() {
  cpu::Features f = cpu::Features::host();
  f.avx512vnni = false;
  return f;
}

// The int8 loops this host runs, each as the features that take it: the host's own where it has
// VNNI (AVX-512, and AMX's tiles where usable), AVX2's (the host narrowed to AVX2 alone), and
// with AVX-VNNI; on ARM64 NEON's with sdot.
struct Path {
  std::string name;
  cpu::Features features;
};
std::vector<Path> int8_paths() {
  const cpu::Features& host = cpu::Features::host();
  std::vector<Path> paths;
  if (has_vnni()) paths.push_back({"avx512 vnni", host});
  if (cpu::missing_features(cpu::Target::avx2, host).empty()) paths.push_back({"avx2", host.limited_to("avx2")});
  if (host.avxvnni) paths.push_back({"avx-vnni", host.limited_to("avxvnni")});
  if (host.dotprod) paths.push_back({"neon sdot", host.limited_to("dotprod")});
  return paths;
}
#define SKIP_WITHOUT_INT8_PATHS() \
  if (int8_paths().empty()) GTEST_SKIP() << "no int8 loop on this host (AVX2, AVX512_VNNI or ARM's sdot)"

// Checks every valid output against the reference on the loop `features` take; returns the
// largest |error| / allowed.
double check(const Int8Case& c, const cpu::Features& features) {
  SCOPED_TRACE(describe(c));
  Outcome o = run(c, features);
  double worst = 0;
  for (const std::vector<float>* got : {&o.got1, &o.got2})
    for (int64_t m = 0; m < c.rows; ++m)
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t e = size_t(m * c.n + j);
        const float v = (*got)[e];
        if (m >= c.valid) {
          EXPECT_EQ(v, 12345.0f) << "row " << m << " is past the valid rows";
          continue;
        }
        const double want = o.ref[e];
        const double allowed =
            o.tol.atol + o.tol.rtol * std::abs(want) + 2 * iron::unit_roundoff(f32) * std::abs(want);
        const double err = std::abs(double(v) - want);
        worst = std::max(worst, err / allowed);
        EXPECT_LE(err, allowed) << "row " << m << " column " << j << ": " << v << " vs " << want
                                << (got == &o.got1 ? " (1 thread)" : " (2 threads)");
      }
  return worst;
}

// The kinds of blocks of 32, and the K-quants (super-blocks of 256), which the int8 path
// rearranges (packed_int8.cpp).
const DType kInt8Weights[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0};
const DType kSuperWeights[] = {DType::q4_k, DType::q5_k, DType::q6_k};

// Every kind the int8 path takes.
std::vector<DType> every_kind() {
  std::vector<DType> kinds;
  for (DType t : kInt8Weights) kinds.push_back(t);
  for (DType t : kSuperWeights) kinds.push_back(t);
  return kinds;
}
// A short row (two blocks of 32, or one of 256), a long one, and one in between.
std::vector<int64_t> row_lengths(DType t) {
  return info(t).block == 256 ? std::vector<int64_t>{256, 768, 1536}
                              : std::vector<int64_t>{64, 576, 1536};
}

// Columns: one, a group of 16 and a rest of 3, and many groups with a rest of one. Under the
// sanitizers 33 (two groups and one) stands for 577 (36 and one): the same edges, where 577 made
// this the longest test of the ASan stage (126 s of its 242 on CI's 2 cores).
#ifdef IRON_SANITIZED_BUILD
constexpr int64_t kManyColumns = 33;
#else
constexpr int64_t kManyColumns = 577;
#endif

TEST(GemmInt8, ProjectionMediumEveryShape) {
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths()) {
    SCOPED_TRACE(path.name);
    double worst = 0;
    for (DType t : every_kind())
      for (int64_t k : row_lengths(t))
        for (int64_t n : {int64_t(1), int64_t(19), kManyColumns})
          for (bool residual : {false, true}) {
            Int8Case c;
            c.w = t, c.k = k, c.n = n, c.residual = residual;
            // One row (decode), a few (a batched decode step: on AVX-512 each count below 8 is a
            // pass of its own and 8 a full one; the 256-bit and NEON loops' passes of 2 to 6 and
            // their rests), and more than a chunk of 32 with a ragged valid count (three passes or
            // more: the group unpacked once where the loop takes that).
            for (auto [rows, valid] : {std::pair<int64_t, int64_t>{1, 1},
                                       {2, 2},
                                       {2, 1},
                                       {3, 3},
                                       {5, 5},
                                       {8, 7},
                                       {40, 37}}) {
              c.rows = rows, c.valid = valid;
              worst = std::max(worst, check(c, path.features));
            }
          }
    std::printf("int8 path (%s), U(-1, 1) x: largest error / tolerance %.3f\n", path.name.c_str(),
                worst);
  }
}

// Kind t's outputs on the loops features a and b take are the same bits, at 1 and 2 threads: a
// decode's one row, passes' rests, and several passes, over every row length.
void expect_same_bits(DType t, const cpu::Features& a, const cpu::Features& b) {
  for (int64_t k : row_lengths(t))
    for (auto [rows, valid] : {std::pair<int64_t, int64_t>{1, 1}, {3, 3}, {8, 7}, {40, 37}}) {
      Int8Case c;
      c.w = t, c.k = k, c.n = 35, c.rows = rows, c.valid = valid, c.gaussian = true;
      SCOPED_TRACE(describe(c));
      const Outcome x = run(c, a), y = run(c, b);
      for (size_t e = 0; e < x.got1.size(); ++e) {
        ASSERT_EQ(x.got1[e], y.got1[e]) << "output " << e << " (1 thread)";
        ASSERT_EQ(x.got2[e], y.got2[e]) << "output " << e << " (2 threads)";
      }
    }
}

TEST(GemmInt8, EveryRowTheSameBitsAloneAndInManyPasses) {
  // A call of more rows than a pass takes reads each group as it was unpacked once for all the
  // passes (int8_pass.hpp's UnpackedGroup, where the loop's Lanes take it), a decode's one row
  // and a batched step's few read the packed group, in passes of other sizes (AVX2's passes of
  // several rows take both halves of a group; 41 rows leave a rest after 4-row and 3-row passes alike): each
  // row's outputs must be the same bits either way (a prompt's rows and a decode's are one model).
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths()) {
    SCOPED_TRACE(path.name);
    for (DType t : every_kind()) {
      Int8Case many;
      many.w = t, many.k = info(t).block == 256 ? 768 : 576, many.n = 35, many.rows = 41, many.valid = 41;
      many.gaussian = true;
      SCOPED_TRACE(describe(many));
      const Outcome all = run(many, path.features);
      std::mt19937 rng(7);
      std::normal_distribution<float> g(0.0f, 1.0f);
      many.x.resize(size_t(many.rows * many.k));
      for (float& v : many.x) v = g(rng);
      const Outcome whole = run(many, path.features);
      ASSERT_NE(all.got1, whole.got1);  // the given x was taken
      for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 1}, {21, 1}, {40, 1}, {38, 3}, {4, 3}}) {
        Int8Case few = many;
        few.rows = few.valid = rows;
        few.x.assign(many.x.begin() + first * many.k, many.x.begin() + (first + rows) * many.k);
        const Outcome part = run(few, path.features);
        for (int64_t e = 0; e < rows * many.n; ++e) {
          ASSERT_EQ(part.got1[size_t(e)], whole.got1[size_t(first * many.n + e)])
              << "row " << first + e / many.n << " of " << rows << " (1 thread)";
          ASSERT_EQ(part.got2[size_t(e)], whole.got2[size_t(first * many.n + e)])
              << "row " << first + e / many.n << " of " << rows << " (2 threads)";
        }
      }
    }
  }
}

TEST(GemmInt8, AvxTwoGivesTheVnniLoopsBits) {
  // The AVX2 loop sums each block exactly in int32 as vpdpbusd does and finishes it with the
  // same f32 operations in the same order, so for every kind but q8_0 (whose quants it takes
  // signed, without the offset term) each output is the VNNI loop's bits; q8_0's stay within
  // the tolerance (ProjectionMediumEveryShape).
  if (!has_vnni()) GTEST_SKIP() << "no AVX512_VNNI on this host to compare with";
  cpu::Features vnni = cpu::Features::host();
  vnni.amx_int8 = false;
  const cpu::Features avx2 = cpu::Features::host().limited_to("avx2");  // vpmaddubsw, not AVX-VNNI
  for (DType t : every_kind())
    if (t != DType::q8_0) expect_same_bits(t, vnni, avx2);
}

TEST(GemmInt8, AvxVnniGivesTheAvxTwoLoopsBits) {
  // AVX-VNNI's vpdpbusd sums each block in the same exact int32 values as vpmaddubsw, the int16
  // partial sums and vpmaddwd do (the AVX2 loops never saturate), in passes of other sizes, so
  // every kind, q8_0 included, gives the AVX2 loops' bits: a decode's one row, passes' rests, and
  // several passes.
  const cpu::Features& host = cpu::Features::host();
  if (!host.avxvnni) GTEST_SKIP() << "no AVX-VNNI on this host";
  const cpu::Features vnni = host.limited_to("avxvnni"), avx2 = host.limited_to("avx2");
  for (DType t : every_kind()) expect_same_bits(t, vnni, avx2);
}

TEST(GemmInt8, AmxTilesGiveTheVnniLoopsBits) {
  // Where AMX-INT8 runs, whole tiles of 16 rows take it, and a rest (or a batched decode
  // step's few rows) one tile of fewer rows from a count that depends on the kind (q8_0 and the
  // K-quants 9, q5_0 / q5_1 12: gemm_fast.cpp); each row's outputs must be the bits the VNNI
  // loop alone gives it (the same exact int32 sums, the same f32 epilogue), for every kind: a
  // step's rows either side of each count, one tile, two, and two plus a rest of 9.
  if (!has_vnni()) GTEST_SKIP() << "no AVX512_VNNI on this host";
  if (!cpu::Features::host().amx_int8) GTEST_SKIP() << "AMX-INT8 is not usable here";
  cpu::Features vnni = cpu::Features::host();
  vnni.amx_int8 = false;
  for (DType t : every_kind()) {
    // An odd count of blocks too (a pair's second block is the layout's padding).
    std::vector<int64_t> lengths = row_lengths(t);
    if (info(t).block == 32) lengths.push_back(96);
    for (int64_t k : lengths)
      for (auto [rows, valid] : {std::pair<int64_t, int64_t>{1, 1},
                                 {2, 2},
                                 {8, 7},
                                 {8, 8},
                                 {9, 9},
                                 {12, 11},
                                 {12, 12},
                                 {15, 15},
                                 {16, 16},
                                 {44, 41},
                                 {100, 100}}) {
        Int8Case c;
        c.w = t, c.k = k, c.n = 35, c.rows = rows, c.valid = valid, c.gaussian = true;
        SCOPED_TRACE(describe(c));
        const Outcome amx = run(c, cpu::Features::host()), alone = run(c, vnni);
        for (size_t e = 0; e < amx.got1.size(); ++e) {
          ASSERT_EQ(amx.got1[e], alone.got1[e]) << "output " << e << " (1 thread)";
          ASSERT_EQ(amx.got2[e], alone.got2[e]) << "output " << e << " (2 threads)";
        }
        check(c, cpu::Features::host());  // and within the tolerance of the reference
      }
  }
}

// Row j of a group's weight at column col, read from the rearranged layout as kernels.hpp
// describes it.
float packed_value(DType t, const uint8_t* group, int64_t j, int64_t col) {
  namespace g = ops::gemm;
  const int64_t b = col / 32, c = col % 32;
  const uint8_t* quants = group + g::int8_quants_at(t, b);
  auto half = [&](int64_t at) {
    uint16_t h;
    std::memcpy(&h, group + at, 2);
    return f16_to_f32(h);
  };
  if (t == DType::q8_0)
    return half(g::int8_d_at(t, b) + 2 * j) *
           float(int(quants[64 * (c / 4) + 4 * j + c % 4]) - 128);
  const uint8_t byte = quants[64 * (c / 8) + 4 * j + c % 4];
  int q = c % 8 < 4 ? byte & 0x0f : byte >> 4;
  // The fifth bit: bit 2 (c / 8) + (c % 8 >= 4) of byte 4j + c % 4 of the fifth load.
  if (g::int8_fifth(t))
    q |= ((quants[256 + 4 * j + c % 4] >> (2 * (c / 8) + (c % 8) / 4)) & 1) << 4;
  if (t == DType::q6_k) {
    // The top 2 bits: bits 4 (c / 8 % 2) + 2 (c % 8 >= 4) of byte 4j + c % 4 of load 4 + c / 16.
    q |=
        ((quants[256 + 64 * (c / 16) + 4 * j + c % 4] >> (4 * (c / 8 % 2) + 2 * ((c % 8) / 4))) & 3)
        << 4;
    const int64_t header = g::int8_k_header_at(t, col / 256);
    const auto scale = int8_t(group[header + 32 + 16 * (col % 256 / 16) + j]);
    return half(header + 2 * j) * float(scale) * float(q - 32);
  }
  if (g::int8_k(t)) {
    const int64_t header = g::int8_k_header_at(t, col / 256), s = b % 8;
    const uint8_t packed = group[header + 64 + 16 * s + j];
    const int minimum =
        packed >> 6 | ((group[header + 192 + 16 * (s / 2) + j] >> (4 * (s % 2))) & 15) << 2;
    return half(header + 2 * j) * float(packed & 63) * float(q) -
           half(header + 32 + 2 * j) * float(minimum);
  }
  const float d = half(g::int8_d_at(t, b) + 2 * j);
  if (g::int8_minimum(t)) return d * float(q) + half(g::int8_m_at(t, b) + 2 * j);
  return d * float(q - (t == DType::q4_0 ? 8 : 16));
}

// The rearranged layout read back equals the source weight, for every row (a ragged last group
// included) and column; padding rows are zero.
TEST(GemmInt8, LayoutReadsBackAsTheSource) {
  for (DType t : every_kind()) {
    SCOPED_TRACE(name(t));
    // Three blocks (a pair and an odd one), or two super-blocks.
    const int64_t n = 37, k = info(t).block == 256 ? 512 : 96, groups = 3;
    std::vector<char> w = random_weight(t, n, k, 7);
    std::vector<float> want(size_t(n * k));
    to_f32(t, w.data(), want.data(), n * k);
    const int64_t group_bytes = ops::gemm::PackedInt8::group_bytes(k, t);
    std::vector<char> packed(size_t(groups * group_bytes), char(0x55));
    ops::gemm::pack_int8(t, w.data(), k / info(t).block * info(t).bytes, n, k, packed.data());
    for (int64_t row = 0; row < groups * 16; ++row)
      for (int64_t col = 0; col < k; ++col) {
        const auto* group =
            reinterpret_cast<const uint8_t*>(packed.data() + row / 16 * group_bytes);
        const float v = packed_value(t, group, row % 16, col);
        if (row >= n) {
          ASSERT_EQ(v, 0.0f) << "padding row " << row;
        } else {
          ASSERT_EQ(v, want[size_t(row * k + col)]) << "row " << row << " column " << col;
        }
      }
  }
}

// x's rows as int8 blocks (the AVX-512 quantiser, which takes up to 16 blocks at a time, a last
// group of fewer by masked stores) equal the arithmetic written out a value at a time: each
// block's largest |x|, its scale and reciprocal, the values rounded to nearest even, the sums of
// the rounded values (the whole block's and each half's) times the scale. Rows of 16, 18
// (SmolLM2's 576), 48, 15 and 7 blocks; one block all zeros, one of values too small for the
// reciprocal (it would overflow: they round to zeros), one holding a single large value; nothing
// written past the row's outputs.
TEST(GemmInt8, QuantisedRowsEqualTheArithmeticWrittenOut) {
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths()) {
    SCOPED_TRACE(path.name);
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t blocks : {16, 18, 48, 15, 7}) {
      SCOPED_TRACE("blocks " + std::to_string(blocks));
      const int64_t k = 32 * blocks;
      std::vector<float> x(static_cast<size_t>(k));
      for (float& v : x) v = normal(rng) * 3.0f;
      std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // block 1: zeros
      for (int64_t e = 64; e < 96; ++e)                 // block 2: too small for 127 / max
        x[size_t(e)] = (e % 2 ? -1e-38f : 2e-38f);
      x[size_t(k - 5)] = 1e6f;                          // the last block: one large value
      // Each output with 16 guard values after it, which must stay as they are.
      constexpr int64_t kGuard = 16;
      constexpr float kUntouched = -7.5f;
      std::vector<int8_t> q(static_cast<size_t>(k + kGuard), int8_t(99));
      std::vector<float> scale(static_cast<size_t>(blocks + kGuard), kUntouched),
          xsum(scale.size(), kUntouched),
          xsum16(static_cast<size_t>(2 * blocks + kGuard), kUntouched);
      // The path's instruction set (select_isa, unlike avx512_isa, is in every build).
      const ops::gemm::Isa* isa = ops::gemm::select_isa(path.features);
      isa->quantise_x8({x.data(), k, q.data(), scale.data(), xsum.data(), xsum16.data()});
      for (int64_t g = 0; g < kGuard; ++g) {
        ASSERT_EQ(q[size_t(k + g)], int8_t(99)) << "a quant written past the row";
        ASSERT_EQ(scale[size_t(blocks + g)], kUntouched) << "a scale written past the row";
        ASSERT_EQ(xsum[size_t(blocks + g)], kUntouched) << "a sum written past the row";
        ASSERT_EQ(xsum16[size_t(2 * blocks + g)], kUntouched)
            << "a half's sum written past the row";
      }
      for (int64_t b = 0; b < blocks; ++b) {
        float mx = 0;
        for (int64_t e = 0; e < 32; ++e) mx = std::max(mx, std::abs(x[size_t(32 * b + e)]));
        const float reciprocal = mx > 0 ? 127.0f / mx : 0.0f, d = mx / 127.0f;
        const float id = std::isinf(reciprocal) ? 0.0f : reciprocal;  // values too small to scale: zeros
        int32_t half[2] = {0, 0};
        for (int64_t e = 0; e < 32; ++e) {
          const auto v = int32_t(std::nearbyint(x[size_t(32 * b + e)] * id));
          ASSERT_EQ(q[size_t(32 * b + e)], int8_t(std::clamp(v, -128, 127)))
              << "block " << b << " value " << e;
          half[e / 16] += v;
        }
        ASSERT_EQ(scale[size_t(b)], d) << "block " << b;
        ASSERT_EQ(xsum[size_t(b)], d * float(half[0] + half[1])) << "block " << b;
        ASSERT_EQ(xsum16[size_t(2 * b)], 32.0f * (d * float(half[0]))) << "block " << b;
        ASSERT_EQ(xsum16[size_t(2 * b + 1)], 32.0f * (d * float(half[1]))) << "block " << b;
      }
    }
  }
}

TEST(GemmInt8, SuperBlocksAndEpilogues) {
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths())
    for (DType t : kSuperWeights)
      for (const char* e : {"none", "relu", "silu", "gelu", "gelu_tanh"})
        for (bool residual : {false, true}) {
          Int8Case c;
          c.w = t, c.epilogue = e, c.residual = residual, c.rows = 2, c.valid = 2, c.n = 33,
          c.k = 256;
          check(c, path.features);
        }
}

TEST(GemmInt8, OddBlocksAndEpilogues) {
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths())
    for (DType t : kInt8Weights)
      for (const char* e : {"none", "relu", "silu", "gelu", "gelu_tanh"})
        for (bool residual : {false, true}) {
          Int8Case c;
          c.w = t, c.epilogue = e, c.residual = residual, c.rows = 2, c.valid = 2, c.n = 33;
          c.k = 96;  // three blocks: a pair and a single one
          check(c, path.features);
          c.k = 32;
          c.valid = 1;
          check(c, path.features);
        }
}

TEST(GemmInt8, GaussianActivationsMeetMediumTolerance) {
  // x ~ N(0, 1): a block's largest |x| (its scale) is larger than for U(-1, 1).
  SKIP_WITHOUT_INT8_PATHS();
  for (const Path& path : int8_paths()) {
    double worst = 0;
    for (DType t : every_kind())
      for (int64_t k : {row_lengths(t)[1], row_lengths(t)[2]}) {
        Int8Case c;
        c.w = t, c.k = k, c.n = 577, c.rows = 2, c.valid = 2, c.gaussian = true;
        worst = std::max(worst, check(c, path.features));
      }
    std::printf("int8 path (%s), N(0, 1) x: largest error / tolerance %.3f\n", path.name.c_str(),
                worst);
  }
}

TEST(GemmInt8, OtherPrecisionsAndGemvNeverTakeIt) {
  // Against the same host without the int8 loop's feature (AVX512_VNNI, or ARM's sdot; AVX2 has
  // none to turn off: OnAvxTwoOnlyProjectionAtMediumTakesIt).
  cpu::Features plain = cpu::Features::host();
  if (has_vnni())
    plain = without_vnni();
  else if (plain.dotprod)
    plain.dotprod = false;
  else
    GTEST_SKIP() << "no AVX512_VNNI or sdot on this host";
  for (DType t : every_kind())
    for (bool residual : {false, true}) {
      std::vector<Int8Case> cases;
      for (Precision p : {Precision::highest, Precision::high}) {
        Int8Case c;
        c.w = t, c.k = 768, c.n = 577, c.rows = 2, c.valid = 2, c.precision = p,
        c.residual = residual;
        c.epilogue = "silu";
        cases.push_back(c);
      }
      Int8Case g;
      g.op = "GEMV", g.w = t, g.k = 768, g.n = 577, g.precision = Precision::medium;
      g.residual = residual;
      cases.push_back(g);
      for (const Int8Case& c : cases) {
        SCOPED_TRACE(describe(c));
        Outcome a = run(c, cpu::Features::host()), b = run(c, plain);
        EXPECT_EQ(0, std::memcmp(a.got1.data(), b.got1.data(), a.got1.size() * 4));
        EXPECT_EQ(0, std::memcmp(a.got2.data(), b.got2.data(), a.got2.size() * 4));
      }
      // And ProjectionGEMM at medium does take it: its result differs from the f32 path's.
      Int8Case m;
      m.w = t, m.k = 768, m.n = 577, m.rows = 2, m.valid = 2, m.residual = residual;
      SCOPED_TRACE(describe(m));
      Outcome a = run(m, cpu::Features::host()), b = run(m, plain);
      EXPECT_NE(0, std::memcmp(a.got1.data(), b.got1.data(), a.got1.size() * 4));
    }
}

TEST(GemmInt8, OnAvxTwoOnlyProjectionAtMediumTakesIt) {
  // AVX2 has no feature to turn the int8 loop off, so: GEMV at medium gives GEMV at highest's
  // bits (one row rounds once from f32 sums), and ProjectionGEMM at medium differs from its
  // highest (it took int8 blocks of x) while meeting medium's tolerance (the tests above).
  const cpu::Features& h = cpu::Features::host();
  if (!cpu::missing_features(cpu::Target::avx2, h).empty()) GTEST_SKIP() << "no AVX2 on this host";
  const cpu::Features avx2 = cpu::narrowed_to(h, cpu::Target::avx2);
  for (DType t : every_kind()) {
    Int8Case g;
    g.op = "GEMV", g.w = t, g.k = 768, g.n = 577, g.precision = Precision::medium;
    SCOPED_TRACE(describe(g));
    Outcome a = run(g, avx2);
    g.precision = Precision::highest;
    Outcome b = run(g, avx2);
    EXPECT_EQ(0, std::memcmp(a.got1.data(), b.got1.data(), a.got1.size() * 4));
    Int8Case m;
    m.w = t, m.k = 768, m.n = 577, m.rows = 2, m.valid = 2;
    a = run(m, avx2);
    m.precision = Precision::highest;
    b = run(m, avx2);
    EXPECT_NE(0, std::memcmp(a.got1.data(), b.got1.data(), a.got1.size() * 4));
  }
}

}  // namespace
}  // namespace iron
