// Every operator's CPU kernel against its reference(), on ragged shapes, several dtypes and
// per-call bounds, at 1 and 2 threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>

#include "iron/functional.hpp"
#include "devices/cpu/kernel.hpp"
#include "ops/copy/convert.hpp"
#include "ops/feature_sets.hpp"
#include "ops/rms_norm/rms_norm.hpp"
#include "ops/op_harness.hpp"
#include "ops/sample/sample.hpp"

namespace iron::test {
namespace {

constexpr DType q8_0 = DType::q8_0, q4_0 = DType::q4_0, q4_1 = DType::q4_1;

struct Types {
  DType a, b, y;
};
const Types kFloatTypes[] = {
    {f32, f32, f32}, {bf16, bf16, bf16}, {f16, f32, f16}, {f32, bf16, bf16}};

// ---- GEMM, ProjectionGEMM, GEMV -------------------------------------------------------------

TEST(OpKernels, GemmRaggedEveryLayoutPrecisionAndDtype) {
  const int64_t M = 5, K = 37, N = 19;
  uint32_t seed = 10;
  for (bool col_maj : {true, false})
    for (Precision p : {Precision::highest, Precision::high, Precision::medium})
      for (const Types& t : kFloatTypes)
        for (int64_t tile_n : {16, 5}) {
          Case c;
          c.op = "GEMM";
          c.params = {{"M", M},
                      {"K", K},
                      {"N", N},
                      {"b_col_maj", col_maj},
                      {"precision", std::string(name(p))}};
          c.tunables = {{"tile_n", tile_n}};
          c.precision = p;
          c.in = {dense({M, K}, t.a, {3, K}), dense(col_maj ? Shape{N, K} : Shape{K, N}, t.b)};
          c.out = {dense({M, N}, t.y, {3, N})};
          c.seed = seed++;
          Result r = run_case(c);
          // Rows past the 3 valid ones are not written.
          for (int64_t e = 3 * N; e < M * N; ++e) ASSERT_EQ(r.two_threads[0][size_t(e)], 5.0f);
        }
}

TEST(OpKernels, GemmQuantisedWeights) {
  const int64_t M = 5, K = 64, N = 19;
  for (DType w : {q8_0, q4_0, q4_1})
    for (DType y : {f32, bf16}) {
      Case c;
      c.op = "GEMM";
      c.params = {{"M", M}, {"K", K}, {"N", N}, {"b_col_maj", true}};
      c.in = {dense({M, K}, f32, {3, K}), dense({N, K}, w)};
      c.out = {dense({M, N}, y, {3, N})};
      c.seed = 20 + uint32_t(w);
      run_case(c);
    }
}

// The 5-bit and K-quant kinds (GGUF's Q4_K_M, Q5_K_M, Q6_K files): GEMM and GEMV, rows of one
// block of 256 (K-quants) or two blocks of 32.
TEST(OpKernels, MatmulFiveBitAndKQuantWeights) {
  uint32_t seed = 60;
  for (DType w : {DType::q5_0, DType::q5_1, DType::q4_k, DType::q5_k, DType::q6_k}) {
    const int64_t M = 5, K = info(w).block == 256 ? 256 : 64, N = 19;
    for (bool gemv : {false, true}) {
      Case c;
      c.op = gemv ? "GEMV" : "GEMM";
      c.params = {{"K", K}, {"N", N}};
      if (!gemv) c.params.set("M", M), c.params.set("b_col_maj", true);
      c.in = {gemv ? dense({1, K}) : dense({M, K}, f32, {3, K}), dense({N, K}, w)};
      c.out = {gemv ? dense({1, N}) : dense({M, N}, f32, {3, N})};
      c.seed = seed++;
      run_case(c);
    }
  }
}

TEST(OpKernels, ProjectionGemmEveryEpilogue) {
  const int64_t M = 5, K = 37, N = 19;
  uint32_t seed = 30;
  for (const char* e : {"none", "relu", "silu", "gelu", "gelu_tanh"})
    for (bool col_maj : {true, false})
      for (DType y : {f32, bf16}) {
        Case c;
        c.op = "ProjectionGEMM";
        c.params = {
            {"M", M}, {"K", K}, {"N", N}, {"b_col_maj", col_maj}, {"epilogue", std::string(e)}};
        c.precision = Precision::high;
        c.in = {dense({M, K}, f32, {3, K}), dense(col_maj ? Shape{N, K} : Shape{K, N}, f32)};
        c.out = {dense({M, N}, y, {3, N})};
        c.seed = seed++;
        run_case(c);
      }
}

// A bias the planner folded in (bias: a row of N per weight, after the residual), before the
// epilogue and the residual; on GEMV, GEMM, ProjectionGEMM and a step of two weights.
TEST(OpKernels, MatmulFoldedBias) {
  const int64_t M = 5, K = 64, N = 19;
  uint32_t seed = 90;
  for (const char* op : {"GEMV", "GEMM", "ProjectionGEMM"})
    for (bool residual : {false, true}) {
      Case c;
      c.op = op;
      const bool gemv = std::string(op) == "GEMV";
      c.params = {{"K", K}, {"N", N}, {"bias", true}, {"residual", residual}};
      if (!gemv) c.params.set("M", M), c.params.set("b_col_maj", true);
      if (std::string(op) == "ProjectionGEMM") c.params.set("epilogue", std::string("gelu")), c.precision = Precision::high;
      const Shape y = gemv ? Shape{1, N} : Shape{M, N};
      c.in = {gemv ? dense({1, K}) : dense({M, K}, f32, {3, K}), dense({N, K})};
      if (residual) c.in.push_back(gemv ? dense(y) : dense(y, f32, {3, N}));
      c.in.push_back(ranged(dense({N}), -4, 4));
      c.out = {gemv ? dense(y) : dense(y, f32, {3, N})};
      c.seed = seed++;
      run_case(c);
    }
  Case c;  // two weights (q and k merged), each with its bias
  c.op = "ProjectionGEMM";
  c.params = {{"M", M}, {"K", K}, {"N", 2 * N}, {"b_col_maj", true}, {"bias", true}, {"parts", int64_t(2)}};
  c.precision = Precision::high;
  c.in = {dense({M, K}, f32, {3, K}), dense({N, K}), dense({N, K}), ranged(dense({N}), -4, 4), ranged(dense({N}), 2, 6)};
  c.out = {dense({M, N}, f32, {3, N}), dense({M, N}, f32, {3, N})};
  c.seed = seed++;
  run_case(c);
}

void gemv_float_and_quantised() {
  uint32_t seed = 40;
  for (DType w : {f32, bf16, f16}) {
    for (DType x : {f32, bf16}) {
      Case c;
      c.op = "GEMV";
      c.params = {{"K", int64_t(37)}, {"N", int64_t(19)}};
      c.in = {dense({37}, x), dense({19, 37}, w)};
      c.out = {dense({19}, x)};
      c.seed = seed++;
      run_case(c);
    }
  }
  {
    Case c;  // one tile wider than N: the second thread has no columns
    c.op = "GEMV";
    c.params = {{"K", int64_t(37)}, {"N", int64_t(19)}};
    c.tunables = {{"tile_n", int64_t(32)}};
    c.in = {dense({1, 37}), dense({19, 37})};
    c.out = {dense({1, 19})};
    run_case(c);
  }
  for (DType w : {q8_0, q4_0, q4_1}) {
    Case c;
    c.op = "GEMV";
    c.params = {{"K", int64_t(96)}, {"N", int64_t(19)}};
    c.tunables = {{"tile_n", int64_t(4)}};
    c.in = {dense({1, 96}), dense({19, 96}, w)};
    c.out = {dense({1, 19})};
    c.seed = seed++;
    run_case(c);
  }
}

TEST(OpKernels, GemvFloatAndQuantised) { gemv_float_and_quantised(); }

// On Vulkan, the matmul a device without subgroup arithmetic takes (64 lanes summed through
// shared memory), forced on this one; on the CPU the same cases again.
TEST(OpKernels, GemvWithoutSubgroupArithmetic) {
  ::setenv("IRON_VULKAN_SUBGROUPS", "0", 1);
  gemv_float_and_quantised();
  ::unsetenv("IRON_VULKAN_SUBGROUPS");
}

// ---- rowwise and unary ----------------------------------------------------------------------

TEST(OpKernels, RmsNormAndLayerNorm) {
  uint32_t seed = 50;
  for (const char* op : {"RMSNorm", "LayerNorm"})
    for (bool weighted : {true, false})
      for (DType t : {f32, bf16, f16})
        for (const Shape& shape : {Shape{5, 19}, Shape{5, 3, 19}}) {
          Case c;
          c.op = op;
          c.params = {{"N", int64_t(19)}, {"epsilon", 1e-5}, {"weighted", weighted}};
          Shape valid = shape;
          valid[0] = 3;
          c.in = {ranged(dense(shape, t, valid), -2, 3)};
          if (weighted) c.in.push_back(ranged(dense({19}, t), 0.5f, 1.5f));
          c.out = {dense(shape, t, valid)};
          c.seed = seed++;
          run_case(c);
        }
}

// RMSNorm's vector row (rms_norm_hwy.cpp) sums as the scalar row does, eight running sums in
// double added in one order: the same bits on every path, for rows shorter than eight, ragged
// and long, weighted or not (what lets a matmul fold the norm on any path).
TEST(OpKernels, RmsNormRowIsTheScalarRowOnEveryPath) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(-3, 3);
  for (const cpu::Features& f : feature_sets())
    for (const int64_t n : {1, 5, 8, 9, 19, 64, 257, 768})
      for (const bool weighted : {true, false}) {
        std::vector<float> x(static_cast<size_t>(n)), w(x.size()), want(x.size()), got(x.size());
        for (size_t i = 0; i < x.size(); ++i) x[i] = u(rng), w[i] = u(rng);
        ops::rms_norm_row(x.data(), weighted ? w.data() : nullptr, want.data(), n, 1e-6);
        ops::rms_norm_row(x.data(), weighted ? w.data() : nullptr, got.data(), n, 1e-6, f);
        EXPECT_EQ(got, want) << f.str() << ", a row of " << n << (weighted ? ", weighted" : "");
      }
}

TEST(OpKernels, SiluAndGelu) {
  uint32_t seed = 60;
  struct U {
    const char* op;
    std::string approximate;
  };
  for (const U& u : {U{"SiLU", ""}, U{"GELU", "none"}, U{"GELU", "tanh"}})
    for (DType t : {f32, bf16, f16})
      for (const Shape& shape : {Shape{5, 37}, Shape{7, 301}}) {
        Case c;
        c.op = u.op;
        c.params = {{"elements", element_count(shape)}};
        if (!u.approximate.empty()) c.params.set("approximate", u.approximate);
        Shape valid = shape;
        valid[0] = shape[0] - 2;
        c.in = {ranged(dense(shape, t, valid), -6, 6)};
        c.out = {dense(shape, t, valid)};
        c.seed = seed++;
        run_case(c);
        c.in = {ranged(dense(shape, t, valid), -40, 40)};  // the tails, where e^-2u over- or underflows
        run_case(c);
      }
}

// ---- RoPE -----------------------------------------------------------------------------------

TEST(OpKernels, RopeModesTablesAndHeads) {
  const int64_t rows = 5, d = 10, half = d / 2;
  uint32_t seed = 70;
  for (const char* mode : {"adjacent", "halves"})
    for (const char* table : {"angles", "cos_sin"})
      for (int64_t heads : {1, 3})
        for (DType t : {f32, bf16}) {
          Case c;
          c.op = "RoPE";
          c.params = {{"head_dim", d},
                      {"heads", heads},
                      {"mode", std::string(mode)},
                      {"table", std::string(table)}};
          Shape shape = heads == 1 ? Shape{rows, d} : Shape{rows, heads, d};
          Shape valid = shape;
          valid[0] = 3;
          std::mt19937 rng(seed);
          std::uniform_real_distribution<double> angle(-std::numbers::pi, std::numbers::pi);
          Arg tab;
          if (std::string(table) == "angles") {
            tab = ranged(dense({rows, half}), -3.2f, 3.2f);
          } else {
            std::vector<float> v(size_t(rows * d));
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t i = 0; i < half; ++i) {
                double a = angle(rng);
                v[size_t(r * d + i)] = float(std::cos(a));
                v[size_t(r * d + half + i)] = float(std::sin(a));
              }
            tab = given({rows, d}, v);
          }
          c.in = {dense(shape, t, valid), tab};
          c.out = {dense(shape, t, valid)};
          c.seed = seed++;
          run_case(c);
        }
}

// ---- Copy, Gather, Transpose ----------------------------------------------------------------

TEST(OpKernels, CopyTransposedViewWithBounds) {
  // The (5, 7) transposed view of a (7, 5) buffer, into a (5, 7) destination bounded to (4, 6).
  for (DType to : {f32, bf16}) {
    Case c;
    c.op = "Copy";
    c.params = {{"elements", int64_t(35)}};
    Arg src = dense({5, 7});
    src.strides = {1, 5};
    c.in = {src};
    c.out = {dense({5, 7}, to, {4, 6})};
    Result r = run_case(c);
    // Hand check of a few elements against the source layout.
    EXPECT_EQ(r.two_threads[0][6], 5.0f);  // column 6 is outside the bound
    EXPECT_EQ(r.two_threads[0][4 * 7], 5.0f);
  }
}

TEST(OpKernels, CopyRank3PermutedAndOffset) {
  Case c;
  c.op = "Copy";
  c.params = {{"elements", int64_t(60)}};
  Arg src = dense({3, 4, 5}, f32, {2, 4, 5});
  src.strides = {5, 15, 1};  // a (4, 3, 5) buffer with its first two axes swapped
  src.offset = 7;
  c.in = {src};
  c.out = {dense({3, 4, 5}, f16, {3, 3, 5})};
  run_case(c);

  Case v;  // rank 1, strided source and destination
  v.op = "Copy";
  v.params = {{"elements", int64_t(6)}};
  Arg s1 = dense({6}, bf16, {5});
  s1.strides = {3};
  Arg d1 = dense({6}, f32);
  d1.strides = {2};
  d1.offset = 1;
  v.in = {s1};
  v.out = {d1};
  run_case(v);
}

TEST(OpKernels, CopyIntoARowAtAPerCallOffset) {
  // A KV-cache write: 3 valid rows of (4, 2, 8) into a (16, 2, 8) cache from row 6 on.
  for (DType cache : {f32, bf16, f16}) {
    Case c;
    c.op = "Copy";
    c.params = {{"elements", int64_t(64)}};
    c.in = {dense({4, 2, 8}, f32, {3, 2, 8})};
    Arg dst = dense({4, 2, 8}, cache);
    dst.offset = 6 * 16;
    dst.offset_per_call = true;
    dst.values.assign(16 * 16, 0.0f);
    c.out = {dst};
    Result r = run_case(c);
    for (int64_t e = 0; e < 16 * 16; ++e) {
      bool written = e >= 6 * 16 && e < 9 * 16;
      if (!written) {
        ASSERT_EQ(r.two_threads[0][size_t(e)], 0.0f) << e;
      }
    }
  }
  // A quantised destination takes only whole blocks (a q8_0 KV cache's rows): a view whose rows
  // are 16 values, or that starts mid-block, is refused when the kernel is made.
  for (auto [shape, offset] : {std::pair<Shape, int64_t>{{3, 16}, 0}, {{3, 32}, 16}}) {
    cpu::Operand q;
    q.dtype = q8_0;
    q.shape = shape;
    q.strides = {shape[1], 1};
    q.offset.constant = offset;
    cpu::KernelArgs args;
    args.in = {q};
    args.out = {q};
    EXPECT_THROW(cpu::kernels().make(*catalog_entry("Copy").make({}, {}), args), Error) << to_string(shape);
  }
}

TEST(OpKernels, CopyQuantisesWholeBlocksIntoQ8_0) {
  // f32 rows written into rows 2..4 of a q8_0 table of 64-wide rows, as a prefill writes keys
  // into a q8_0 cache; the reference rounds each block the same way.
  for (DType from : {f32, bf16}) {
    Case c;
    c.op = "Copy";
    c.params = {{"elements", int64_t(192)}};
    c.in = {ranged(dense({3, 64}, from), -4, 4)};
    Arg cache = dense({3, 64}, q8_0);
    cache.offset = 2 * 64;
    c.out = {cache};
    run_case(c);
    cache.offset_per_call = true;  // the cache's window starts at a per-call position
    c.out = {cache};
    run_case(c);
  }
}

TEST(OpKernels, CopyCastsBetweenDtypes) {
  for (DType from : {f32, bf16, f16})
    for (DType to : {f32, bf16, f16}) {
      Case c;
      c.op = "Copy";
      c.params = {{"elements", int64_t(95)}};
      c.in = {ranged(dense({5, 19}, from, {3, 19}), -300, 300)};
      c.out = {dense({5, 19}, to, {5, 19})};
      run_case(c);
    }
  Case q;  // dequantising a q8_0 block view
  q.op = "Copy";
  q.params = {{"elements", int64_t(128)}};
  Arg qs = dense({2, 64}, q8_0);
  qs.offset = 64;
  q.in = {qs};
  q.out = {dense({2, 64}, bf16)};
  run_case(q);
}

// The lanes that write f16 and bf16 caches give the scalar conversions' bits on the values where
// rounding is delicate: ties, the edge of f16's range, its subnormals, f32's subnormals, NaNs
// (any payload, either sign) and infinities, at every length up to 40 (each tail), on every
// vector target this host has.
TEST(OpKernels, CopyConversionsInLanesGiveTheScalarBits) {
  int targets = 0;
  auto from_bits = [](uint32_t b) {
    float x;
    std::memcpy(&x, &b, 4);
    return x;
  };
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e30f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), 3 * std::ldexp(1.0f, -25),
                               std::ldexp(1.0f, -14), std::nextafter(std::ldexp(1.0f, -14), 0.0f), 1e-40f, -1e-45f,
                               from_bits(0x7fc00001u), from_bits(0xff800001u), from_bits(0x7fffffffu),
                               from_bits(0x3f808000u), from_bits(0x3f818000u), from_bits(0x3f801000u),
                               from_bits(0x3f803000u), from_bits(0x477fefffu), from_bits(0x477ff000u)};
  uint32_t state = 12345;
  while (values.size() < 200) {  // random bits, NaNs and all
    state = state * 1664525u + 1013904223u;
    values.push_back(from_bits(state));
  }
  for (const cpu::Features& f : test::feature_sets()) {
    const ops::copy::ConvertFn to_f16 = ops::copy::f32_convert_vector(f16, f);
    const ops::copy::ConvertFn to_bf16 = ops::copy::f32_convert_vector(bf16, f);
    ASSERT_EQ(to_f16 == nullptr, to_bf16 == nullptr) << f.str();
    if (!to_f16) continue;
    ++targets;
    SCOPED_TRACE(f.str());
    for (int64_t n = 0; n <= 40; ++n)
      for (size_t at = 0; at + size_t(n) <= values.size(); at += 7) {
        std::vector<uint16_t> lanes(size_t(n) + 1, 0xabcd);
        std::vector<uint16_t> scalar(static_cast<size_t>(n));
        to_f16(values.data() + at, lanes.data(), n);
        for (int64_t i = 0; i < n; ++i) scalar[size_t(i)] = f32_to_f16(values[at + size_t(i)]);
        EXPECT_TRUE(std::equal(scalar.begin(), scalar.end(), lanes.begin())) << "f16, " << n << " from " << at;
        EXPECT_EQ(lanes[size_t(n)], 0xabcd) << "f16 wrote past its " << n;
        to_bf16(values.data() + at, lanes.data(), n);
        for (int64_t i = 0; i < n; ++i) scalar[size_t(i)] = f32_to_bf16(values[at + size_t(i)]);
        EXPECT_TRUE(std::equal(scalar.begin(), scalar.end(), lanes.begin())) << "bf16, " << n << " from " << at;
        EXPECT_EQ(lanes[size_t(n)], 0xabcd) << "bf16 wrote past its " << n;
      }
    // q8_0, block by block: the random values above (NaNs and infinities among them: those
    // blocks take the scalar loop), then blocks whose quotients fall on halves (rounded away
    // from zero), zeros, one large value among small ones, and subnormals.
    const ops::copy::ConvertFn to_q8_0 = ops::copy::f32_convert_vector(DType::q8_0, f);
    ASSERT_NE(to_q8_0, nullptr);
    std::vector<float> blocks(values.begin(), values.begin() + 192);
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < 32; ++i) {
        const float sign = i % 2 ? -1.0f : 1.0f;
        switch (b) {
          case 0: blocks.push_back(sign * (i == 0 ? 127.0f : float(i) + 0.5f)); break;  // x / scale = i + 0.5
          case 1: blocks.push_back(0.0f); break;
          case 2: blocks.push_back(i == 7 ? 1e30f : sign * 1e-3f * float(i)); break;
          default: blocks.push_back(sign * 1e-40f * float(i + 1)); break;
        }
      }
    const int64_t n = int64_t(blocks.size());
    std::vector<uint8_t> lanes(size_t(n / 32 * 34) + 1, 0xab), scalar(size_t(n / 32 * 34));
    to_q8_0(blocks.data(), lanes.data(), n);
    from_f32(DType::q8_0, blocks.data(), scalar.data(), n);
    for (int64_t b = 0; b < n / 32; ++b)
      EXPECT_TRUE(std::equal(scalar.begin() + b * 34, scalar.begin() + (b + 1) * 34, lanes.begin() + b * 34))
          << "q8_0 block " << b;
    EXPECT_EQ(lanes.back(), 0xab) << "q8_0 wrote past its blocks";
  }
  if (targets == 0) GTEST_SKIP() << "no vector target here (the scalar conversions run)";
}

TEST(OpKernels, CopyAndGatherGatheredRows) {
  for (const char* op : {"Copy", "Gather"})
    for (DType from : {f32, bf16}) {
      Case c;
      c.op = op;
      if (std::string(op) == "Copy")
        c.params = {{"elements", int64_t(24)}};
      else
        c.params = {{"rows", int64_t(4)}, {"row_elements", int64_t(6)}};
      Arg src = dense({4, 6}, from, {3, 6});
      src.ids = {3, 0, 10, 5};
      src.table_rows = 11;
      c.in = {src};
      c.out = {dense({4, 6}, f32)};
      Result r = run_case(c);
      for (int64_t e = 18; e < 24; ++e) EXPECT_EQ(r.two_threads[0][size_t(e)], 5.0f);
    }
  Case f;  // fixed rows
  f.op = "Gather";
  f.params = {{"rows", int64_t(5)}, {"row_elements", int64_t(9)}};
  Arg src = dense({5, 9}, bf16);
  src.fixed_rows = {12, 0, 7, 7, 3};
  src.table_rows = 13;
  f.in = {src};
  f.out = {dense({5, 9}, f32, {5, 8})};
  run_case(f);
}

TEST(OpKernels, Transpose) {
  for (DType t : {f32, bf16}) {
    Case c;
    c.op = "Transpose";
    c.params = {{"rows", int64_t(6)}, {"columns", int64_t(9)}};
    Arg src = dense({6, 9}, t);
    src.strides = {1, 6};  // the .T of a (9, 6) buffer
    c.in = {src};
    c.out = {dense({6, 9}, t, {5, 9})};
    run_case(c);
  }
}

// ---- elementwise ----------------------------------------------------------------------------

TEST(OpKernels, ElementwiseSameShapeAndBroadcastRow) {
  uint32_t seed = 90;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "SwiGLU", "GeGLU"})
    for (bool broadcast : {false, true})
      for (const Types& t : kFloatTypes) {
        Case c;
        c.op = op;
        c.params = {{"elements", int64_t(5 * 19)}, {"broadcast_row", broadcast}};
        Arg b = broadcast ? dense({19}, t.b) : dense({5, 19}, t.b);
        if (std::string(op) == "Div") b = ranged(b, 0.5f, 2);
        c.in = {dense({5, 19}, t.a, {3, 19}), b};
        c.out = {dense({5, 19}, t.y, {3, 19})};
        c.seed = seed++;
        Result r = run_case(c);
        for (int64_t e = 3 * 19; e < 5 * 19; ++e) ASSERT_EQ(r.two_threads[0][size_t(e)], 5.0f);
      }
  // Large enough for several 256-element chunks per thread.
  Case big;
  big.op = "Mul";
  big.params = {{"elements", int64_t(9 * 301)}, {"broadcast_row", true}};
  big.in = {dense({9, 301}, bf16, {7, 301}), dense({301}, f32)};
  big.out = {dense({9, 301}, bf16, {7, 301})};
  run_case(big);
}

// ---- Softmax and Sample ---------------------------------------------------------------------

TEST(OpKernels, SoftmaxPerCallLength) {
  uint32_t seed = 100;
  for (DType t : {f32, bf16, f16})
    for (double scale : {1.0, 0.7}) {
      Case c;
      c.op = "Softmax";
      c.params = {{"N", int64_t(19)}, {"scale", scale}};
      c.in = {ranged(dense({5, 19}, t, {3, 13}), -4, 4)};
      c.out = {dense({5, 19}, t, {3, 19})};
      c.seed = seed++;
      Result r = run_case(c);
      for (const auto& out : {r.one_thread[0], r.two_threads[0]})
        for (int64_t row = 0; row < 5; ++row) {
          double sum = 0;
          for (int64_t i = 0; i < 19; ++i) {
            float v = out[size_t(row * 19 + i)];
            if (row >= 3) {
              ASSERT_EQ(v, 5.0f);  // rows past the bound are not written
            } else if (i >= 13) {
              ASSERT_EQ(v, 0.0f) << "row " << row << " entry " << i << " is past the length";
            }
            sum += v;
          }
          if (row < 3) {
            EXPECT_NEAR(sum, 1.0, t == f32 ? 1e-6 : 0.05);
          }
        }
    }
  for (int64_t len : {0, 1, 19}) {  // no entry, one, all of them
    Case c;
    c.op = "Softmax";
    c.params = {{"N", int64_t(19)}};
    c.in = {dense({2, 19}, f32, {2, len})};
    c.out = {dense({2, 19})};
    Result r = run_case(c);
    if (len == 0) {
      for (float v : r.two_threads[0]) ASSERT_EQ(v, 0.0f);
    }
    if (len == 1) {
      EXPECT_EQ(r.two_threads[0][0], 1.0f);
    }
  }
  Case rank3;  // (rows, heads, N): the bound on the last axis holds for every head
  rank3.op = "Softmax";
  rank3.params = {{"N", int64_t(11)}};
  rank3.in = {dense({4, 3, 11}, f32, {2, 3, 6})};
  rank3.out = {dense({4, 3, 11}, f32, {2, 3, 11})};
  run_case(rank3);
}

TEST(OpKernels, SampleGreedyTiesTakeTheLowestId) {
  for (DType t : {f32, bf16, f16}) {
    std::vector<float> logits(19);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(int(i * 7 % 11)) * 0.25f - 1;
    logits[4] = 3.5f;
    logits[11] = 3.5f;
    logits[17] = 3.5f;
    Case c;
    c.op = "Sample";
    c.params = {{"N", int64_t(19)}};
    c.in = {given({19}, logits, t)};
    c.out = {dense({1}, i32)};
    Result r = run_case(c);
    EXPECT_EQ(r.ref[0][0], 4.0f);
    EXPECT_EQ(r.one_thread[0][0], 4.0f);
    EXPECT_EQ(r.two_threads[0][0], 4.0f);
  }
  // NaN never wins; every value NaN gives id 0 (greedy over a whole vocabulary runs on one
  // thread, by a largest-value pass and a first-index pass that must keep these rules).
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<std::vector<float>, float>> nan_cases{
      {{nan, 1, nan, 3, 3, -inf, nan, 2, 0, 1, 3}, 3.0f},
      {{nan, -inf, -inf}, 1.0f},
      {{nan, nan, nan}, 0.0f},
      {{-inf, nan, -inf, -1, 7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, 7, 8}, 18.0f}};
  for (const auto& [logits, want] : nan_cases) {
    Case c;
    c.op = "Sample";
    c.params = {{"N", int64_t(logits.size())}};
    c.in = {given({int64_t(logits.size())}, logits)};
    c.out = {dense({1}, i32)};
    Result r = run_case(c);
    EXPECT_EQ(r.ref[0][0], want);
    EXPECT_EQ(r.two_threads[0][0], want);
  }
  Case random;
  random.op = "Sample";
  random.params = {{"N", int64_t(1000)}};
  random.in = {dense({1, 1000}, bf16)};
  random.out = {dense({1}, i32)};
  run_case(random);
}

// Per-call settings (a second operand, as a server's requests give them) draw exactly what the
// same settings give as compile-time params: the doubles and the 64-bit seed travel bit for bit.
TEST(OpKernels, SampleSettingsOperandDrawsAsTheParams) {
  struct Setting {
    double temperature;
    int64_t top_k;
    double top_p;
    uint64_t seed;
  };
  const std::vector<Setting> settings{{0.8, 40, 0.95, 42},   {0.9, 0, 1.0, ~uint64_t(0)}, {1.7, 5, 0.5, 1u << 31},
                                      {0.1, 1, 0.3, 7},      {0.0, 40, 0.95, 3},          {1e-3, 1000, 0.999, 0x123456789abcdef0ull}};
  for (const Setting& st : settings)
    for (int64_t counter : {0, 3, 1000})
      for (int64_t position : {0, 17}) {
        Case params, operand;
        params.op = operand.op = "Sample";
        params.params = {{"N", int64_t(300)}, {"temperature", st.temperature}, {"top_k", st.top_k},
                         {"top_p", st.top_p}, {"seed", int64_t(st.seed)}};
        operand.params = {{"N", int64_t(300)}};
        Tensor words = functional::sample_settings(st.temperature, st.top_k, st.top_p, st.seed);
        std::vector<float> w(words.data_as<int32_t>(), words.data_as<int32_t>() + words.numel());
        params.in = {ranged(dense({300}), -3, 3)};
        operand.in = {ranged(dense({300}), -3, 3), given({16}, w, i32)};
        params.out = operand.out = {dense({1}, i32)};
        params.scalars = operand.scalars = {counter, position};
        params.seed = operand.seed = uint32_t(counter + position + 5);
        if (st.temperature > 0 && !ops::vulkan_draws(st.top_k, 300))
          params.not_on_vulkan = operand.not_on_vulkan = "Sample at a temperature over more than 256 candidates";
        Result a = run_case(params), b = run_case(operand);
        EXPECT_EQ(b.ref[0][0], a.ref[0][0]) << "temperature " << st.temperature << " counter " << counter;
        EXPECT_EQ(b.one_thread[0][0], a.one_thread[0][0]);
        EXPECT_EQ(b.two_threads[0][0], a.two_threads[0][0]);
      }
  // Settings words from anywhere (a corrupt state, a caller's own tensor) still sample: every
  // word's low 16 bits are read, a temperature that is not a positive number is greedy.
  for (float fill : {-1.0f, 65535.0f, 32768.0f, 16384.0f}) {
    Case c;
    c.op = "Sample";
    c.params = {{"N", int64_t(50)}};
    c.in = {ranged(dense({50}), -3, 3), given({16}, std::vector<float>(16, fill), i32)};
    c.out = {dense({1}, i32)};
    c.scalars = {1, 2};
    c.not_on_vulkan = "garbage settings words (the host never passes them; the CPU kernel tolerates them)";
    Result r = run_case(c);
    EXPECT_GE(r.ref[0][0], 0.0f);
    EXPECT_LT(r.ref[0][0], 50.0f);
  }
  EXPECT_THROW(functional::sample_settings(-0.1, 40, 0.9, 1), Error);
  EXPECT_THROW(functional::sample_settings(std::nan(""), 40, 0.9, 1), Error);
  EXPECT_THROW(functional::sample_settings(0.5, -1, 0.9, 1), Error);
  EXPECT_THROW(functional::sample_settings(0.5, 40, 0.0, 1), Error);
  EXPECT_THROW(functional::sample_settings(0.5, 40, 1.5, 1), Error);
}

}  // namespace
}  // namespace iron::test
