// Each operator's reference() on a tiny case computed by hand (the kernel is checked against the
// reference on the same case by run_case).
#include <numbers>

#include "ops/op_harness.hpp"

namespace iron::test {
namespace {

constexpr double kTight = 1e-6;

TEST(OpReference, GemmTwoByTwo) {
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
  for (bool col_maj : {false, true}) {
    Case c;
    c.op = "GEMM";
    c.params = {{"M", int64_t(2)}, {"K", int64_t(2)}, {"N", int64_t(2)}, {"b_col_maj", col_maj}};
    std::vector<float> b =
        col_maj ? std::vector<float>{5, 7, 6, 8} : std::vector<float>{5, 6, 7, 8};
    c.in = {given({2, 2}, {1, 2, 3, 4}), given({2, 2}, b)};
    c.out = {dense({2, 2})};
    Result r = run_case(c);
    expect_near(r.ref[0], {19, 22, 43, 50}, 0);
  }
}

TEST(OpReference, GemmBoundedRowsLeaveTheRestAlone) {
  Case c;
  c.op = "GEMM";
  c.params = {{"M", int64_t(2)}, {"K", int64_t(2)}, {"N", int64_t(2)}};
  c.in = {given({2, 2}, {1, 2, 3, 4}), given({2, 2}, {5, 6, 7, 8})};
  c.in[0].valid = {1, 2};
  c.out = {dense({2, 2})};
  Result r = run_case(c);
  expect_near(r.ref[0], {19, 22, 5, 5}, 0);  // the second row keeps its initial 5s
}

TEST(OpReference, ProjectionGemmEpilogues) {
  // x = [1, -2] against weight rows [1, 1] and [1, -1]: sums -1 and 3, then the epilogue.
  struct E {
    const char* name;
    std::vector<double> want;
  };
  const double silu3 = 3 / (1 + std::exp(-3.0)), silu_1 = -1 / (1 + std::exp(1.0));
  const double gelu3 = 0.5 * 3 * (1 + std::erf(3 / std::numbers::sqrt2));
  const double gelu_1 = 0.5 * -1 * (1 + std::erf(-1 / std::numbers::sqrt2));
  for (const E& e : {E{"none", {-1, 3}}, E{"relu", {0, 3}}, E{"silu", {silu_1, silu3}},
                     E{"gelu", {gelu_1, gelu3}}}) {
    Case c;
    c.op = "ProjectionGEMM";
    c.params = {{"M", int64_t(1)},
                {"K", int64_t(2)},
                {"N", int64_t(2)},
                {"b_col_maj", true},
                {"epilogue", std::string(e.name)}};
    c.in = {given({1, 2}, {1, -2}), given({2, 2}, {1, 1, 1, -1})};
    c.out = {dense({1, 2})};
    Result r = run_case(c);
    expect_near(r.ref[0], e.want, kTight);
  }
}

TEST(OpReference, GemvDotProducts) {
  // [1, 2] . [1, 1] = 3, [1, 2] . [2, -1] = 0, [1, 2] . [0.5, 0.25] = 1
  Case c;
  c.op = "GEMV";
  c.params = {{"K", int64_t(2)}, {"N", int64_t(3)}};
  c.in = {given({2}, {1, 2}), given({3, 2}, {1, 1, 2, -1, 0.5f, 0.25f})};
  c.out = {dense({3})};
  expect_near(run_case(c).ref[0], {3, 0, 1}, 0);
}

TEST(OpReference, RmsNormThreeFour) {
  // rms([3, 4]) = sqrt(12.5)
  Case c;
  c.op = "RMSNorm";
  c.params = {{"N", int64_t(2)}, {"epsilon", 0.0}, {"weighted", false}};
  c.in = {given({1, 2}, {3, 4})};
  c.out = {dense({1, 2})};
  expect_near(run_case(c).ref[0], {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)}, kTight);

  c.params.set("weighted", true);
  c.in.push_back(given({2}, {2, 0.5f}));
  expect_near(run_case(c).ref[0], {6 / std::sqrt(12.5), 2 / std::sqrt(12.5)}, kTight);
}

TEST(OpReference, LayerNormOneTwoThree) {
  // mean 2, variance 2/3: [-1, 0, 1] / sqrt(2/3); weighted by [1, 5, 2].
  Case c;
  c.op = "LayerNorm";
  c.params = {{"N", int64_t(3)}, {"epsilon", 0.0}, {"weighted", false}};
  c.in = {given({1, 3}, {1, 2, 3})};
  c.out = {dense({1, 3})};
  const double s = 1.224744871391589;
  expect_near(run_case(c).ref[0], {-s, 0, s}, kTight);
  c.params.set("weighted", true);
  c.in.push_back(given({3}, {1, 5, 2}));
  expect_near(run_case(c).ref[0], {-s, 0, 2 * s}, kTight);
}

TEST(OpReference, SiluValues) {
  Case c;
  c.op = "SiLU";
  c.params = {{"elements", int64_t(3)}};
  c.in = {given({3}, {1, 0, -1})};
  c.out = {dense({3})};
  expect_near(run_case(c).ref[0], {0.7310585786300049, 0, -0.2689414213699951}, kTight);
}

TEST(OpReference, GeluExactAndTanh) {
  Case c;
  c.op = "GELU";
  c.params = {{"elements", int64_t(3)}, {"approximate", std::string("none")}};
  c.in = {given({3}, {1, 0, -1})};
  c.out = {dense({3})};
  // GELU(-1) = -1 + GELU(1) (x Phi(x) - x = -x Phi(-x)).
  expect_near(run_case(c).ref[0], {0.8413447460685429, 0, 0.8413447460685429 - 1}, kTight);
  c.params.set("approximate", std::string("tanh"));
  expect_near(run_case(c).ref[0], {0.8411919906082768, 0, 0.8411919906082768 - 1}, kTight);
}

TEST(OpReference, RopeQuarterTurn) {
  const float quarter = float(std::numbers::pi / 2);
  // [1, 0] turned by pi/2 is [0, 1]; [0, 2] by pi/2 is [-2, 0].
  Case c;
  c.op = "RoPE";
  c.params = {{"head_dim", int64_t(2)}};
  c.in = {given({2, 2}, {1, 0, 0, 2}), given({2, 1}, {quarter, quarter})};
  c.out = {dense({2, 2})};
  expect_near(run_case(c).ref[0], {0, 1, -2, 0}, kTight);

  // Halves of [1, 2, 3, 4]: pairs (1, 3) by pi/2 -> (-3, 1), (2, 4) by 0 -> (2, 4). Two heads,
  // the second [1, 0, 0, 0] -> [0, 0, 1, 0]; a cos/sin table [cos a0, cos a1, sin a0, sin a1].
  for (const char* table : {"angles", "cos_sin"}) {
    Case h;
    h.op = "RoPE";
    h.params = {{"head_dim", int64_t(4)},
                {"heads", int64_t(2)},
                {"mode", std::string("halves")},
                {"table", std::string(table)}};
    Arg t =
        std::string(table) == "angles" ? given({1, 2}, {quarter, 0}) : given({1, 4}, {0, 1, 1, 0});
    h.in = {given({1, 2, 4}, {1, 2, 3, 4, 1, 0, 0, 0}), t};
    h.out = {dense({1, 2, 4})};
    expect_near(run_case(h).ref[0], {-3, 2, 1, 4, 0, 0, 1, 0}, kTight);
  }
}

TEST(OpReference, SoftmaxOfZeroAndLogThree) {
  Case c;
  c.op = "Softmax";
  c.params = {{"N", int64_t(3)}};
  c.in = {given({1, 3}, {0, float(std::log(3.0)), 100})};
  c.in[0].valid = {1, 2};  // the 100 is past this call's length
  c.out = {dense({1, 3})};
  expect_near(run_case(c).ref[0], {0.25, 0.75, 0}, kTight);

  c.params.set("scale", 2.0);  // softmax(2 * [0, ln(3)/2]) is the same
  c.in[0].values = {0, float(std::log(3.0) / 2), 100};
  expect_near(run_case(c).ref[0], {0.25, 0.75, 0}, kTight);
}

TEST(OpReference, SampleFirstOfTiedMaxima) {
  Case c;
  c.op = "Sample";
  c.params = {{"N", int64_t(4)}};
  c.in = {given({4}, {1, 3, 3, 2})};
  c.out = {dense({1}, i32)};
  expect_near(run_case(c).ref[0], {1}, 0);
}

TEST(OpReference, CopyTransposeGather) {
  // The transpose of [[1, 2, 3], [4, 5, 6]] is [[1, 4], [2, 5], [3, 6]].
  for (const char* op : {"Copy", "Transpose"}) {
    Case c;
    c.op = op;
    if (std::string(op) == "Transpose") c.params = {{"rows", int64_t(3)}, {"columns", int64_t(2)}};
    Arg src = given({3, 2}, {1, 2, 3, 4, 5, 6});
    src.strides = {1, 3};
    c.in = {src};
    c.out = {dense({3, 2}, bf16)};
    expect_near(run_case(c).ref[0], {1, 4, 2, 5, 3, 6}, 0);
  }
  // Rows 2 and 0 of [[1, 2], [3, 4], [5, 6]].
  Case g;
  g.op = "Gather";
  Arg table = given({2, 2}, {1, 2, 3, 4, 5, 6});
  table.ids = {2, 0};
  table.table_rows = 3;
  g.in = {table};
  g.out = {dense({2, 2})};
  expect_near(run_case(g).ref[0], {5, 6, 1, 2}, 0);
  // A cast rounds once: 1 + 2^-9 is not a bf16, and rounds to 1 (ties to even).
  Case cast;
  cast.op = "Copy";
  cast.in = {given({2}, {1.0f + 1.0f / 512, 3.0f})};
  cast.out = {dense({2}, bf16)};
  expect_near(run_case(cast).ref[0], {1, 3}, 0);
}

TEST(OpReference, ElementwiseAndBroadcast) {
  struct E {
    const char* op;
    std::vector<double> same, row;  // [[1, 2], [3, 4]] op [[4, 2], [1, 8]], and op row [4, 2]
  };
  for (const E& e :
       {E{"Add", {5, 4, 4, 12}, {5, 4, 7, 6}}, E{"Sub", {-3, 0, 2, -4}, {-3, 0, -1, 2}},
        E{"Mul", {4, 4, 3, 32}, {4, 4, 12, 8}}, E{"Div", {0.25, 1, 3, 0.5}, {0.25, 1, 0.75, 2}}}) {
    Case c;
    c.op = e.op;
    c.in = {given({2, 2}, {1, 2, 3, 4}), given({2, 2}, {4, 2, 1, 8})};
    c.out = {dense({2, 2})};
    expect_near(run_case(c).ref[0], e.same, 0);
    c.params = {{"broadcast_row", true}};
    c.in[1] = given({2}, {4, 2});
    expect_near(run_case(c).ref[0], e.row, 0);
  }
}

}  // namespace
}  // namespace iron::test
