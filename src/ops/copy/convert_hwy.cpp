// Copy's conversions from f32 into the 2-byte types (convert.hpp), written once with Highway
// (devices/cpu/highway.hpp) for every target it has here. Bit for bit iron::f32_to_f16 and
// iron::f32_to_bf16: round to nearest even (the f16 conversion instructions do; bf16's is done
// on the bits, since AVX-512's vcvtneps2bf16 flushes subnormals), and a vector holding a NaN
// takes the scalar conversion, whose NaN is the one every other path writes (the instructions
// keep part of the payload).
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/copy/convert_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "iron/dtype.hpp"

HWY_BEFORE_NAMESPACE();
namespace iron::ops::copy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;

void f32_to_f16_rows(const float* src, uint16_t* dst, int64_t n) {
  const D d;
  const hn::Rebind<hwy::float16_t, D> dh;
  const int64_t lanes = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::LoadU(d, src + i);
    if (!hn::AllFalse(d, hn::IsNaN(x))) {
      for (int64_t k = 0; k < lanes; ++k) dst[i + k] = f32_to_f16(src[i + k]);
      continue;
    }
    hn::StoreU(hn::DemoteTo(dh, x), dh, reinterpret_cast<hwy::float16_t*>(dst + i));
  }
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f32_to_bf16_rows(const float* src, uint16_t* dst, int64_t n) {
  const D d;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  const int64_t lanes = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::LoadU(d, src + i);
    if (!hn::AllFalse(d, hn::IsNaN(x))) {
      for (int64_t k = 0; k < lanes; ++k) dst[i + k] = f32_to_bf16(src[i + k]);
      continue;
    }
    // Round to nearest even on the bits: add 0x7fff and the lowest kept bit, keep the top 16.
    const auto b = hn::BitCast(du, x);
    const auto odd = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1));
    const auto top = hn::ShiftRight<16>(hn::Add(b, hn::Add(hn::Set(du, 0x7fff), odd)));
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, top)), d16, dst + i);  // each below 2^16: exact
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace iron::ops::copy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "devices/cpu/highway.hpp"
#include "ops/copy/convert.hpp"

namespace iron::ops::copy {

ConvertFn f32_convert_vector(DType to, const cpu::Features& f) {
  if (to == DType::f16) return IRON_HWY_PICK(f, copy, f32_to_f16_rows);
  if (to == DType::bf16) return IRON_HWY_PICK(f, copy, f32_to_bf16_rows);
  return nullptr;
}

}  // namespace iron::ops::copy
#endif
