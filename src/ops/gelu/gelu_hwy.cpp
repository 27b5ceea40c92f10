// GELU over f32 rows in vector lanes, written once with Highway (devices/cpu/highway.hpp) for
// every target it has here. The exact form: 0.5 x (1 + erf(x / sqrt 2)), erf from gelu.hpp's
// polynomials, each lane's interval's coefficients looked up (a BERT encoder's feed-forward; the
// scalar erf was an eighth of all-MiniLM-L6-v2's time). The tanh form: 0.5 x (1 + tanh(u)) is
// x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), with a vector e^x (devices/cpu/hwy_lanes-inl.h; Gemma's
// feed-forward runs it on every element of its 2048-wide rows; the scalar tanh in double took a
// third of a prefill).
#include <cstddef>
#include <cstdint>

#define HWY_TARGET_INCLUDE "ops/gelu/gelu_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "devices/cpu/hwy_lanes-inl.h"
#include "ops/gelu/gelu.hpp"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::gelu_hwy)

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Each lane's interval's coefficient of degree `degree`: a permute of the table row where a
// vector holds its 8 intervals (8 to 16 lanes: kErfPoly's rows are 16 floats, the last 8 zero),
// else a gather.
V coefficient(D d, int degree, hn::Vec<hn::RebindToSigned<D>> interval) {
  const float* row = kErfPoly[degree];
  const size_t lanes = hn::Lanes(d);
  if (lanes >= 8 && lanes <= 16) return hn::TableLookupLanes(hn::LoadU(d, row), hn::IndicesFromVec(d, interval));
  return hn::GatherIndex(d, row, interval);
}

V erf(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V ax = hn::Abs(x);
  // The interval, floor(2 |x|) held to 7, and its centre 0.5 i + 0.25, in floats; the index from
  // the low bits of i + 2^23 (exact for 0..7), which costs a third of a checked conversion to
  // int. A NaN takes interval 7 (Min gives the other operand) and goes through u as a NaN.
  const V interval = hn::Floor(hn::Min(hn::Add(ax, ax), hn::Set(d, 7.0f)));
  const auto i = hn::And(hn::BitCast(di, hn::Add(interval, hn::Set(d, 8388608.0f))), hn::Set(di, 7));
  const V u = hn::Sub(ax, hn::MulAdd(interval, hn::Set(d, 0.5f), hn::Set(d, 0.25f)));
  V r = coefficient(d, kErfDegree, i);
  for (int degree = kErfDegree - 1; degree >= 0; --degree) r = hn::MulAdd(r, u, coefficient(d, degree, i));
  r = hn::IfThenElse(hn::Ge(ax, hn::Set(d, 4.0f)), hn::Set(d, 1.0f), r);
  return hn::CopySignToAbs(r, x);  // erf is odd: |x|'s value with x's sign
}

V gelu_erf(D d, V x) {
  const V h = hn::Mul(hn::Set(d, 0.5f), x);
  return hn::MulAdd(h, erf(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f))), h);
}

V gelu_tanh(D d, V x) {
  const V inner = hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), x), hn::Mul(x, x), x);  // x + 0.044715 x^3
  const V arg = hn::Mul(hn::Set(d, -2.0f * 0.7978845608028654f), inner);
  // Past 88, e^(-2u) is past the largest float: x / (1 + e) is then 0 (exp() holds its argument
  // below that). A NaN goes through as a NaN.
  const V e = cpu::lanes::HWY_NAMESPACE::Exp(d, arg);
  const V y = hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
  return hn::IfThenZeroElse(hn::Gt(arg, hn::Set(d, 88.0f)), y);
}

// `form` over n values in place; the tail through the same lanes, padded with zeros.
template <class Form>
void rows(float* v, int64_t n, Form form) {
  const D d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(form(d, hn::LoadU(d, v + i)), d, v + i);
  if (i < n) {
    HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = v[j];
    hn::Store(form(d, hn::Load(d, tail)), d, tail);
    for (int64_t j = i; j < n; ++j) v[j] = tail[j - i];
  }
}

void erf_rows(float* v, int64_t n) { rows(v, n, [](D d, V x) { return gelu_erf(d, x); }); }
void tanh_rows(float* v, int64_t n) { rows(v, n, [](D d, V x) { return gelu_tanh(d, x); }); }

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops {

bool gelu_rows_vector(float* v, int64_t n, bool tanh, const cpu::Features& f) {
  return cpu::run_picked(tanh ? IRON_HWY_PICK(f, gelu_hwy, tanh_rows) : IRON_HWY_PICK(f, gelu_hwy, erf_rows), v, n);
}

}  // namespace iron::ops
#endif
