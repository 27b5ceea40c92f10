// The matmul kernels (portable, AVX2, AVX-512 as the host offers) against the op's reference:
// every weight dtype (the 5-bit and K-quant kinds included), ragged N and rows, bounded rows,
// epilogues, 1 and 2 threads.
#include "ops/feature_sets.hpp"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "graph/prepared.hpp"
#include "iron/operator.hpp"
#include "ops/op.hpp"
#include "ops/gemm/kernels.hpp"
#include "ops/gemm_test_util.hpp"

namespace iron {
namespace {

using gemm_testing::operand;
using gemm_testing::random_weight;

struct Case {
  std::string op;  // GEMV, GEMM or ProjectionGEMM
  DType w;
  int64_t rows, valid, k, n;
  std::string epilogue = "none";
  Precision precision = Precision::highest;
  DType act = f32;
  bool bias = false;      // a bias row folded in (the planner's "bias")
  bool prepared = false;  // W is a weight (it may be rearranged once: bf16 tiles, int8 groups)
};

std::string describe(const Case& c) {
  return c.op + " w=" + std::string(name(c.w)) + " a=" + std::string(name(c.act)) +
         " rows=" + std::to_string(c.rows) + " valid=" + std::to_string(c.valid) +
         " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) + " " + c.epilogue + " " +
         std::string(name(c.precision)) + (c.bias ? " bias" : "") + (c.prepared ? " prepared" : "");
}

// Runs `c` with `features` on 1 and 2 threads and checks every valid output.
void check(const Case& c, const cpu::Features& features) {
  SCOPED_TRACE(describe(c) + " on " + features.str());
  cpu::ThreadPool::shared(2);
  Fields params{{"K", c.k}, {"N", c.n}};
  if (c.op != "GEMV") {
    params.set("M", c.rows);
    params.set("b_col_maj", true);
    params.set("precision", std::string(name(c.precision)));
  }
  if (c.op == "ProjectionGEMM") params.set("epilogue", c.epilogue);
  if (c.bias) params.set("bias", true);
  std::shared_ptr<Operator> op = catalog_entry(c.op).make(params, {});

  // Activations: random values rounded to their dtype; the reference sees the rounded values.
  std::mt19937 rng(uint32_t(c.k * 131 + c.n * 7 + c.rows));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(size_t(c.rows * c.k));
  for (auto& x : a) x = round_to(c.act, u(rng));
  std::vector<char> a_bytes(a.size() * 4);
  from_f32(c.act, a.data(), a_bytes.data(), int64_t(a.size()));
  std::vector<char> w = random_weight(c.w, c.n, c.k, uint32_t(c.n + c.k));
  std::vector<float> w_ref(size_t(c.n * c.k));
  to_f32(c.w, w.data(), w_ref.data(), c.n * c.k);

  const DType out = c.act;
  const bool gemv_shape = c.op == "GEMV" && c.rows == 1;
  Shape a_shape = gemv_shape ? Shape{c.k} : Shape{c.rows, c.k};
  Shape y_shape = gemv_shape ? Shape{c.n} : Shape{c.rows, c.n};
  std::vector<char> y_bytes(size_t(c.rows * c.n * 4));
  cpu::KernelArgs args;
  args.in = {operand(c.act, a_shape, a_bytes.data(), {0, 0}),
             operand(c.w, {c.n, c.k}, w.data(), {-1, c.n})};
  args.out = {operand(out, y_shape, y_bytes.data(), {0, 0})};
  std::vector<float> bias(size_t(c.n));
  for (auto& b : bias) b = 2 * u(rng);
  if (c.bias) args.in.push_back(operand(f32, {c.n}, reinterpret_cast<char*>(bias.data()), {-1, c.n}));
  args.precision = c.precision;
  args.features = &features;
  if (c.prepared) args.in[1].prepared = std::make_shared<PreparedForms>();
  std::unique_ptr<cpu::Kernel> kernel = cpu::kernels().make(*op, args);

  std::vector<float> ref(size_t(c.rows * c.n), 0.0f);
  RefCall call;
  call.in = {{a.data(), a_shape, {c.valid, c.k}, c.act},
             {w_ref.data(), {c.n, c.k}, {c.n, c.k}, c.w}};
  call.out = {{ref.data(), y_shape, {c.valid, c.n}, out}};
  if (c.bias) call.in.push_back({bias.data(), {c.n}, {c.n}, f32});
  if (gemv_shape) call.in[0].valid = {c.k}, call.out[0].valid = {c.n};
  op->reference(call);
  const Tolerance tol = op->tolerance(c.precision);

  const int64_t words[1] = {c.valid};
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const float sentinel = 12345.0f;
    std::vector<float> fill(size_t(c.rows * c.n), sentinel);
    from_f32(out, fill.data(), y_bytes.data(), int64_t(fill.size()));
    cpu::run_kernel(*kernel, words, threads);
    std::vector<float> got(fill.size());
    to_f32(out, y_bytes.data(), got.data(), int64_t(got.size()));
    for (int64_t m = 0; m < c.rows; ++m)
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t e = size_t(m * c.n + j);
        if (m >= c.valid) {
          ASSERT_EQ(got[e], round_to(out, sentinel)) << "row " << m << " is past the valid rows";
          continue;
        }
        const double want = ref[e], slack = 2 * iron::unit_roundoff(out) * std::abs(want);
        ASSERT_LE(std::abs(double(got[e]) - want), tol.atol + tol.rtol * std::abs(want) + slack)
            << "row " << m << " column " << j << ": " << got[e] << " vs " << want;
      }
  }
}

using test::matmul_feature_sets;

const DType kWeights[] = {f32,         bf16,        f16,         DType::q8_0, DType::q4_0, DType::q4_1,
                          DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k, DType::q6_k};

// A short row of `t`: 37 (ragged) for a float kind, else two blocks of 32 or one of 256.
int64_t short_k(DType t) { return info(t).quantised ? std::max(64, info(t).block) : 37; }
// A long row: `k`, or the next multiple of the block.
int64_t long_k(DType t, int64_t k) { return (k + info(t).block - 1) / info(t).block * info(t).block; }

TEST(GemmFast, GemvEveryWeightDtype) {
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : kWeights)
      for (int64_t n : {19, 1, 577})
        for (int64_t k : {short_k(t), long_k(t, 96)})
          check({"GEMV", t, 1, 1, k, n}, f);
}

TEST(GemmFast, GemmEveryWeightDtypeRaggedRows) {
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : kWeights)
      for (int64_t n : {19, 1, 577}) {
        const int64_t k = short_k(t);
        check({"GEMM", t, 1, 1, k, n}, f);
        check({"GEMM", t, 3, 2, k, n}, f);
        check({"GEMM", t, 3, 3, k, n}, f);
        check({"GEMM", t, 65, 65, k, n}, f);
        check({"GEMM", t, 65, 17, k, n}, f);
      }
}

TEST(GemmFast, GemmLongK) {
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : kWeights) {
      check({"GEMM", t, 20, 20, long_k(t, 576), 70}, f);
      check({"GEMV", t, 1, 1, 1536, 40}, f);
    }
}

TEST(GemmFast, ProjectionEpilogues) {
  for (const cpu::Features& f : matmul_feature_sets())
    for (const char* e : {"none", "relu", "silu", "gelu", "gelu_tanh"})
      for (Precision p : {Precision::high, Precision::medium}) {
        check({"ProjectionGEMM", DType::q4_1, 9, 9, 96, 33, e, p}, f);
        check({"ProjectionGEMM", DType::q5_k, 9, 9, 256, 33, e, p}, f);
        check({"ProjectionGEMM", f32, 9, 7, 37, 33, e, p}, f);
      }
}

TEST(GemmFast, MediumPrecisionEveryWeightDtype) {
  // Several rows at medium may take bf16 inputs (AVX512_BF16); one row never does.
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : kWeights)
      for (int64_t n : {19, 577}) {
        const int64_t k = short_k(t);
        check({"ProjectionGEMM", t, 65, 65, k, n, "none", Precision::medium}, f);
        check({"ProjectionGEMM", t, 65, 17, k, n, "silu", Precision::medium}, f);
        check({"ProjectionGEMM", t, 3, 3, long_k(t, 576), n, "none", Precision::medium}, f);
        check({"GEMM", t, 1, 1, k, n, "none", Precision::medium}, f);
      }
}

TEST(GemmFast, MediumPrecisionTilesOfAmx) {
  // Where AMX runs, medium takes its tiles for k a multiple of 32: rows padded to 16 (ragged and
  // bounded rows), several panels of 256 columns and a ragged last tile, every float weight kind.
  if (!cpu::Features::host().amx_bf16) std::printf("AMX-BF16 is not usable here: its tiles are not tested\n");
  // (Without AMX they run on the AVX-512 bf16 tiles, on W read as bf16 and widened to f32
  // (tile_w16: prepared weights where bf16 products do not run) or on the portable loops.)
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : {f32, bf16, f16})
      for (bool prepared : {false, true}) {
        // W packed per call, or once as the weight's prepared bf16 tiles.
        for (Case c : {Case{"ProjectionGEMM", t, 37, 37, 64, 577, "none", Precision::medium},
                       Case{"ProjectionGEMM", t, 100, 70, 96, 19, "gelu", Precision::medium},
                       Case{"ProjectionGEMM", t, 130, 130, 384, 100, "none", Precision::medium}}) {
          c.prepared = prepared;
          check(c, f);
        }
      }
}

TEST(GemmFast, MediumReadsFloatWeightsAsBf16PairsForEveryRowCount) {
  // A weight's bf16 pairs serve one row and many at medium: widened in registers below
  // kWidenRows rows, widened a tile at a time from there, multiplied as bf16 where that runs;
  // an odd k keeps the f32 loops.
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType t : {f32, bf16, f16})
      for (int64_t rows : {1, 2, 5, 31, 32, 33})
        for (int64_t k : {64, 38, 37}) {
          Case c{"ProjectionGEMM", t, rows, rows, k, 41, "silu", Precision::medium};
          c.prepared = true;
          check(c, f);
        }
}

// Outputs of `rows` rows (the first of `a`, k columns) at medium over a prepared weight `w`.
std::vector<float> medium_rows(const cpu::Features& f, DType t, const std::vector<char>& w, std::vector<float> a,
                               int64_t rows, int64_t k, int64_t n) {
  Fields params{{"K", k}, {"N", n}, {"M", rows}, {"b_col_maj", true}, {"precision", std::string("medium")}};
  std::shared_ptr<Operator> op = catalog_entry("ProjectionGEMM").make(params, {});
  std::vector<float> y(size_t(rows * n));
  cpu::KernelArgs args;
  args.in = {operand(f32, {rows, k}, reinterpret_cast<char*>(a.data()), {0, 0}),
             operand(t, {n, k}, const_cast<char*>(w.data()), {-1, n})};
  args.in[1].prepared = std::make_shared<PreparedForms>();
  args.out = {operand(f32, {rows, n}, reinterpret_cast<char*>(y.data()), {0, 0})};
  args.precision = Precision::medium;
  args.features = &f;
  const int64_t words[1] = {rows};
  cpu::run_kernel(*cpu::kernels().make(*op, args), words, 2);
  return y;
}

TEST(GemmFast, MediumFloatWeightsGiveARowTheSameBitsInAnyBatch) {
  // Where bf16 products do not run, every row count reads the same pairs in the same order of
  // sums (tile_w16, or its tile widened first), so a row's outputs do not depend on the batch.
  const int64_t k = 96, n = 70;
  for (const cpu::Features& f : matmul_feature_sets()) {
    if (f.bf16_pairs_fast || f.amx_bf16 || !ops::gemm::select_isa(f)) continue;
    SCOPED_TRACE(f.str());
    for (DType t : {f32, bf16}) {
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> a(size_t(40 * k));
      for (float& x : a) x = u(rng);
      const std::vector<char> w = random_weight(t, n, k, 11);
      // 40 rows widen tiles first; 20 take tile_w16's widest pass and a rest; 5 a narrow pass.
      const std::vector<float> many = medium_rows(f, t, w, a, 40, k, n), some = medium_rows(f, t, w, a, 20, k, n),
                               few = medium_rows(f, t, w, a, 5, k, n);
      for (int64_t m = 0; m < 5; ++m) {
        const std::vector<float> alone =
            medium_rows(f, t, w, std::vector<float>(a.begin() + m * k, a.begin() + (m + 1) * k), 1, k, n);
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_EQ(alone[size_t(j)], many[size_t(m * n + j)]) << "row " << m << " column " << j << ", 40 rows";
          ASSERT_EQ(alone[size_t(j)], some[size_t(m * n + j)]) << "row " << m << " column " << j << ", 20 rows";
          ASSERT_EQ(alone[size_t(j)], few[size_t(m * n + j)]) << "row " << m << " column " << j << ", 5 rows";
        }
      }
    }
  }
}

TEST(GemmFast, FoldedBiasOnEveryPath) {
  // A bias the planner folded in, before the epilogue: the GEMV loop, f32 tiles, bf16 (AMX or
  // AVX-512) tiles, the int8 path and the portable loops.
  for (const cpu::Features& f : matmul_feature_sets()) {
    Case gemv{"GEMV", f32, 1, 1, 64, 19};
    Case tiles{"GEMM", f32, 20, 17, 64, 70};
    Case bf16_tiles{"ProjectionGEMM", f32, 37, 37, 64, 577, "gelu", Precision::medium};
    Case int8{"ProjectionGEMM", DType::q8_0, 9, 9, 64, 33, "gelu", Precision::medium};
    for (Case* c : {&gemv, &tiles, &bf16_tiles, &int8})
      for (bool prepared : {false, true}) {
        c->bias = true;
        c->prepared = prepared;
        check(*c, f);
      }
  }
}

TEST(GemmFast, HalfActivations) {
  for (const cpu::Features& f : matmul_feature_sets())
    for (DType act : {bf16, f16}) {
      check({"GEMV", DType::q4_1, 1, 1, 64, 19, "none", Precision::highest, act}, f);
      check({"GEMM", DType::q8_0, 10, 6, 64, 35, "none", Precision::highest, act}, f);
      check({"GEMM", bf16, 10, 10, 37, 35, "none", Precision::highest, act}, f);
    }
}

TEST(GemmFast, EnvironmentNarrowsFeatures) {
  const cpu::Features& host = cpu::Features::host();
  cpu::Features p = host.limited_to("portable");
  EXPECT_FALSE(p.avx2 || p.fma || p.avx512f || p.avx512bw);
  EXPECT_EQ(p.str(), "portable");
  cpu::Features a = host.limited_to("avx2");
  EXPECT_FALSE(a.avx512f || a.avx512bf16 || a.bf16_pairs_fast);
  EXPECT_EQ(a.avx2, host.avx2);
  cpu::Features b = host.limited_to("avx512");
  EXPECT_FALSE(b.amx_bf16);
  EXPECT_EQ(b.avx512bf16, host.avx512bf16);
}

}  // namespace
}  // namespace iron
