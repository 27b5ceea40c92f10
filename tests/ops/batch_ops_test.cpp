// The operators of a batched decode (docs/design.md, "Batched decode"): SlotRows, Copy into rows
// picked by ids (a scatter), Attention over cache slots, Sample of a batch of rows, and GEMM at
// highest summing each of a few rows exactly as GEMV sums it alone. Each against its reference,
// and each row against the same row computed alone, bit for bit.
#include "ops/op_harness.hpp"
#include "ops/sample/sample.hpp"

namespace iron::test {
namespace {

std::vector<float> as_floats(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

TEST(SlotRows, KernelMatchesReferenceAndMarksRowsOutOfRange) {
  Case c;
  c.op = "SlotRows";
  c.params = {{"slots", int64_t(3)}, {"slot_rows", int64_t(10)}};
  c.in = {given({5}, {0, 2, 1, 3, -1}, i32), given({5}, {4, 9, 0, 1, 2}, i32)};
  c.out = {dense({5}, i32)};
  expect_near(run_case(c).one_thread[0], {4, 29, 10, -1, -1}, 0);
  EXPECT_THROW(catalog_entry("SlotRows").make({{"slots", int64_t(0)}, {"slot_rows", int64_t(4)}}, {}), Error);
}

// A scatter: row i of the source goes to row ids[i] of the destination, rounded to its dtype
// as a copy into a window rounds it; an id outside the table (-1 from SlotRows, or past its end)
// writes nothing, and the other rows keep what they held.
TEST(CopyScatter, WritesRowsByIdsAsTheReference) {
  for (DType t : {f32, f16, DType::q8_0}) {
    Case c;
    c.op = "Copy";
    c.params = {{"elements", int64_t(5 * 2 * 32)}};
    c.in = {ranged(dense({5, 2, 32}), -2, 2)};
    Arg dst = dense({5, 2, 32}, t);
    dst.ids = {5, -1, 1, 8, 7};
    dst.table_rows = 8;
    // The table starts a row into its buffer, so a write to row -1 would land in memory every
    // device compares (a GPU may drop a write outside a buffer, hiding it).
    dst.offset = 64;
    c.out = {dst};
    Result r = run_case(c);
    // The row before the table and rows 0, 2, 3, 4 and 6 keep the 5 the harness filled outputs
    // with (as the dtype holds it); rows 1, 5 and 7 are written.
    const float kept = r.one_thread[0][0];
    EXPECT_NEAR(kept, 5.0f, 1e-3);
    for (int64_t row : {0, 2, 3, 4, 6})
      EXPECT_EQ(r.one_thread[0][size_t(64 + row * 64)], kept) << name(t) << " row " << row;
    for (int64_t row : {1, 5, 7}) EXPECT_NE(r.one_thread[0][size_t(64 + row * 64)], kept) << name(t) << " row " << row;
  }
}

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  return x;
}

// Every row of a batched decode against the reference, then against a one-row decode of its
// slot's rows alone: equal bit for bit (same partial cuts, same combine), with a window too. A
// row out of its slot (position R + 3: no partials) between them is zeros and moves no other
// row's share of the work off its keys.
TEST(SlotAttention, EachRowIsItsSlotDecodedAlone) {
  const int64_t heads = 4, kv = 2, d = 32, R = 300, slots = 3;
  const std::vector<int32_t> positions{250, 0, int32_t(R + 3), 17, 299}, slot_of{2, 0, 1, 1, 2};
  const int64_t B = int64_t(positions.size());
  for (DType cache : {f32, f16}) {
    for (int64_t window : {int64_t(0), int64_t(100)}) {
      const std::vector<float> q = random_values(B * heads * d, 1), k = random_values(slots * R * kv * d, 2),
                               v = random_values(slots * R * kv * d, 3);
      Case c;
      c.op = "Attention";
      c.params = {{"heads", heads}, {"kv_heads", kv}, {"head_dim", d}, {"ctx", slots * R}, {"window", window},
                  {"slot_rows", R}};
      c.tunables = {{"split", int64_t(64)}};
      c.in = {given({B, heads, d}, q), given({slots * R, kv, d}, k, cache), given({slots * R, kv, d}, v, cache),
              given({B}, as_floats(positions), i32), given({B}, as_floats(slot_of), i32)};
      c.out = {dense({B, heads, d})};
      c.scalars = {0};
      const Result batch = run_case(c);
      for (int64_t b = 0; b < B; ++b) {
        if (positions[size_t(b)] >= R) {
          for (int64_t e = 0; e < heads * d; ++e) {
            ASSERT_EQ(batch.one_thread[0][size_t(b * heads * d + e)], 0.0f) << "row " << b << " element " << e;
            ASSERT_EQ(batch.two_threads[0][size_t(b * heads * d + e)], 0.0f) << "row " << b << " element " << e;
          }
          continue;
        }
        const int64_t from = slot_of[size_t(b)] * R * kv * d;
        Case alone;
        alone.op = "Attention";
        alone.params = {{"heads", heads}, {"kv_heads", kv}, {"head_dim", d}, {"ctx", R}, {"window", window}};
        alone.tunables = c.tunables;
        alone.in = {given({1, heads, d}, {q.begin() + b * heads * d, q.begin() + (b + 1) * heads * d}),
                    given({R, kv, d}, {k.begin() + from, k.begin() + from + R * kv * d}, cache),
                    given({R, kv, d}, {v.begin() + from, v.begin() + from + R * kv * d}, cache)};
        alone.out = {dense({1, heads, d})};
        alone.scalars = {positions[size_t(b)]};
        const Result one = run_case(alone);
        for (int64_t e = 0; e < heads * d; ++e) {
          ASSERT_EQ(batch.one_thread[0][size_t(b * heads * d + e)], one.one_thread[0][size_t(e)])
              << name(cache) << " window " << window << " row " << b << " element " << e;
          ASSERT_EQ(batch.two_threads[0][size_t(b * heads * d + e)], one.one_thread[0][size_t(e)]);
        }
      }
    }
  }
}

TEST(SlotAttention, RefusesBadParams) {
  auto make = [](int64_t slot_rows, int64_t segment) {
    return catalog_entry("Attention")
        .make({{"heads", int64_t(2)}, {"kv_heads", int64_t(1)}, {"head_dim", int64_t(8)}, {"ctx", int64_t(12)},
               {"slot_rows", slot_rows}, {"segment", segment}},
              {});
  };
  EXPECT_THROW(make(5, 0), Error);   // 5 does not divide 12
  EXPECT_THROW(make(-1, 0), Error);
  EXPECT_THROW(make(6, 6), Error);   // not with segments
  EXPECT_NO_THROW(make(6, 0));
}

std::vector<float> settings_row(double temperature, int64_t top_k, double top_p, uint64_t seed) {
  std::vector<int32_t> w(static_cast<size_t>(ops::kSettingsWords));
  ops::encode_settings({temperature, top_k, top_p, seed}, w.data());
  return as_floats(w);
}

// A batch of draws, each with its own settings, step and position, as that row drawn alone.
TEST(SampleRows, EachRowDrawsAsItDrawsAlone) {
  const int64_t n = 300, B = 4;
  const std::vector<float> logits = random_values(B * n, 7);
  const std::vector<std::vector<float>> settings{settings_row(0, 40, 0.95, 1), settings_row(0.8, 40, 0.95, 11),
                                                 settings_row(1.3, 100, 1.0, 12), settings_row(0.5, 5, 0.5, 13)};
  const std::vector<int32_t> steps{0, 3, 9, 1}, positions{5, 17, 2, 40};
  std::vector<float> all;
  for (const auto& row : settings) all.insert(all.end(), row.begin(), row.end());
  Case c;
  c.op = "Sample";
  c.params = {{"N", n}, {"rows", B}};
  c.in = {given({B, n}, logits), given({B, ops::kSettingsWords}, all, i32), given({B}, as_floats(steps), i32),
          given({B}, as_floats(positions), i32)};
  c.out = {dense({B}, i32)};
  const Result batch = run_case(c);
  for (int64_t b = 0; b < B; ++b) {
    Case alone;
    alone.op = "Sample";
    alone.params = {{"N", n}};
    alone.in = {given({n}, {logits.begin() + b * n, logits.begin() + (b + 1) * n}),
                given({ops::kSettingsWords}, settings[size_t(b)], i32)};
    alone.out = {dense({1}, i32)};
    alone.scalars = {steps[size_t(b)], positions[size_t(b)]};
    EXPECT_EQ(batch.one_thread[0][size_t(b)], run_case(alone).one_thread[0][0]) << "row " << b;
  }
  EXPECT_THROW(catalog_entry("Sample").make({{"N", n}, {"rows", int64_t(0)}}, {}), Error);
}

// At highest, a GEMM of up to 8 rows sums each row as the GEMV sums it alone, for float and
// block weights (the fast kernels' GEMV loop; the portable loops take a dot per row anyway).
TEST(GemmRows, AtHighestEachOfAFewRowsIsItsGemvBitForBit) {
  const int64_t K = 512, N = 200;
  // Every kind the GEMV loops take over several rows at once (gemv_many), the K-quants included.
  // K of 512 is two super-blocks of the K-quants.
  for (DType w : {f32, bf16, f16, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0, DType::q4_k,
                  DType::q5_k, DType::q6_k}) {
    for (int64_t M : {int64_t(2), int64_t(3), int64_t(5), int64_t(8)}) {
      const std::vector<float> a = random_values(M * K, 21), weights = random_values(N * K, 22);
      Case c;
      c.op = "GEMM";
      c.params = {{"M", M}, {"K", K}, {"N", N}, {"b_col_maj", true}};
      c.in = {given({M, K}, a), given({N, K}, weights, w)};
      c.out = {dense({M, N})};
      const Result rows = run_case(c);
      for (int64_t m = 0; m < M; ++m) {
        Case one;
        one.op = "GEMV";
        one.params = {{"K", K}, {"N", N}};
        one.in = {given({K}, {a.begin() + m * K, a.begin() + (m + 1) * K}), given({N, K}, weights, w)};
        one.out = {dense({N})};
        const Result alone = run_case(one);
        for (int64_t e = 0; e < N; ++e)
          ASSERT_EQ(rows.one_thread[0][size_t(m * N + e)], alone.one_thread[0][size_t(e)])
              << name(w) << " M " << M << " row " << m << " column " << e;
      }
    }
  }
}

}  // namespace
}  // namespace iron::test
