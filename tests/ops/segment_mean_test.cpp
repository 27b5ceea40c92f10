// SegmentMean: the kernel against its reference over full, partial, empty and out-of-range
// segments, and the reference against hand-computed means.
#include "ops/op_harness.hpp"

namespace iron::test {
namespace {

Case segment_mean_case(int64_t segment, std::vector<float> lengths, int64_t n, DType dtype = f32) {
  const int64_t batch = int64_t(lengths.size());
  Case c;
  c.op = "SegmentMean";
  c.params = {{"segment", segment}, {"N", n}};
  c.in = {ranged(dense({batch * segment, n}, dtype), -3, 3), given({batch}, std::move(lengths), i32)};
  c.out = {dense({batch, n}, dtype)};
  return c;
}

TEST(SegmentMean, KernelMatchesReference) {
  uint32_t seed = 10;
  for (const Case& base : {segment_mean_case(8, {8, 3, 0, 1}, 16), segment_mean_case(32, {29, 32, 7}, 384),
                           segment_mean_case(4, {9, -2, 4}, 5), segment_mean_case(16, {16, 5}, 24, bf16)}) {
    Case c = base;
    c.seed = seed++;
    run_case(c);
  }
}

TEST(SegmentMean, MeansTheValidRowsOnly) {
  Case c;
  c.op = "SegmentMean";
  c.params = {{"segment", int64_t(3)}, {"N", int64_t(2)}};
  // Segment 0: rows (1, 2), (3, 4), (100, 100) of which 2 are valid; segment 1: none.
  c.in = {given({6, 2}, {1, 2, 3, 4, 100, 100, 5, 5, 5, 5, 5, 5}), given({2}, {2, 0}, i32)};
  c.out = {dense({2, 2})};
  expect_near(run_case(c).ref[0], {2, 3, 0, 0}, 0);
}

TEST(SegmentMean, RefusesBadParams) {
  EXPECT_THROW(catalog_entry("SegmentMean").make({{"segment", int64_t(0)}, {"N", int64_t(4)}}, {}), Error);
}

}  // namespace
}  // namespace iron::test
