// RMSNorm's row in vector lanes, written once with Highway (devices/cpu/highway.hpp) for every
// target it has here: the sum of squares in double over eight lanes (as the scalar row's eight
// running sums, in vectors of as many doubles as the target holds), then x * scale * weight in
// double and rounded once, as the scalar row does. Gemma's encoder normalises every row six
// times a layer (its heads' queries and keys among them): the scalar row was a tenth of
// EmbeddingGemma's time.
#include <cmath>
#include <cstddef>
#include <cstdint>

#define HWY_TARGET_INCLUDE "ops/rms_norm/rms_norm_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "devices/cpu/hwy_lanes-inl.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::rms_norm_hwy)

using DD = hn::CappedTag<double, 8>;
using DF = hn::Rebind<float, DD>;  // as many floats as DD has doubles

void row(const float* x, const float* weight, float* y, int64_t n, double eps) {
  const DD dd;
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(dd)), vectors = 8 / lanes;  // 1, 2, 4 (or 8) vectors: 8 sums
  // The sums live in `part` (SVE's vectors have no size, so no array of them): loaded and stored
  // each step, which the compiler keeps in registers where the width is fixed.
  HWY_ALIGN double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int64_t v = 0; v < vectors; ++v) {
      const auto d = hn::PromoteTo(dd, hn::LoadU(df, x + i + v * lanes));
      hn::Store(hn::Add(hn::Load(dd, part + v * lanes), hn::Mul(d, d)), dd, part + v * lanes);
    }
  for (; i < n; ++i) part[0] += double(x[i]) * double(x[i]);
  const double ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
  cpu::lanes::HWY_NAMESPACE::NormalisedRow<false>(x, weight, y, n, 0.0, scale);
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops {

bool rms_norm_row_vector(const float* x, const float* weight, float* y, int64_t n, double eps,
                         const cpu::Features& f) {
  return cpu::run_picked(IRON_HWY_PICK(f, rms_norm_hwy, row), x, weight, y, n, eps);
}

}  // namespace iron::ops
#endif
