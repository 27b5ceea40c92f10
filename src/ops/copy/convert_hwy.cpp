// Copy's conversions from f32 into the 2-byte types and q8_0 (convert.hpp), written once with
// Highway (devices/cpu/highway.hpp) for every target it has here. Bit for bit iron::f32_to_f16,
// iron::f32_to_bf16 and iron::from_f32's q8_0: round to nearest even (the f16 conversion instructions do; bf16's is done
// on the bits, since AVX-512's vcvtneps2bf16 flushes subnormals), and a vector holding a NaN
// takes the scalar conversion, whose NaN is the one every other path writes (the instructions
// keep part of the payload).
#include <cmath>
#include <cstdint>
#include <cstring>

#define HWY_TARGET_INCLUDE "ops/copy/convert_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "iron/dtype.hpp"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::copy)

using D = hn::ScalableTag<float>;

// n values into 2-byte ones: `lanes_to(x)` a vector's (as 2-byte lanes), `scalar(x)` one value's,
// which a vector holding a NaN and the tail take.
template <class Lanes, class Scalar>
HWY_INLINE void two_byte_rows(const float* src, uint16_t* dst, int64_t n, Lanes lanes_to, Scalar scalar) {
  const D d;
  const hn::Rebind<uint16_t, D> d16;
  const int64_t lanes = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::LoadU(d, src + i);
    if (!hn::AllFalse(d, hn::IsNaN(x))) {
      for (int64_t k = 0; k < lanes; ++k) dst[i + k] = scalar(src[i + k]);
      continue;
    }
    hn::StoreU(lanes_to(x), d16, dst + i);
  }
  for (; i < n; ++i) dst[i] = scalar(src[i]);
}

void f32_to_f16_rows(const float* src, void* out, int64_t n) {
  const hn::Rebind<hwy::float16_t, D> dh;
  const hn::Rebind<uint16_t, D> d16;
  two_byte_rows(
      src, static_cast<uint16_t*>(out), n, [&](auto x) { return hn::BitCast(d16, hn::DemoteTo(dh, x)); },
      [](float x) { return f32_to_f16(x); });
}

void f32_to_bf16_rows(const float* src, void* out, int64_t n) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  // Round to nearest even on the bits: add 0x7fff and the lowest kept bit, keep the top 16.
  auto lanes_to = [&](auto x) {
    const auto b = hn::BitCast(du, x);
    const auto odd = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1));
    const auto top = hn::ShiftRight<16>(hn::Add(b, hn::Add(hn::Set(du, 0x7fff), odd)));
    return hn::DemoteTo(d16, hn::BitCast(di, top));  // each below 2^16: exact
  };
  two_byte_rows(src, static_cast<uint16_t*>(out), n, lanes_to, [](float x) { return f32_to_bf16(x); });
}

// Whole blocks of 32 as q8_0 (a KV cache's rows), as iron::from_f32 writes them (llama.cpp's
// quantize_row_q8_0): scale = largest |x| / 127, q = x / scale rounded half away from zero. A
// block holding a NaN or an infinity, or so small that 1 / scale overflows, takes the scalar
// loop.
void f32_to_q8_0_rows(const float* src, void* out, int64_t n) {
  const hn::CappedTag<float, 32> d;  // a block at most (SVE's vectors may be longer)
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const int64_t lanes = int64_t(hn::Lanes(d));
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n / 32; ++b, src += 32, dst += 34) {
    auto largest = hn::Zero(d);
    bool finite = true;
    for (int64_t i = 0; i < 32; i += lanes) {
      const auto x = hn::LoadU(d, src + i);
      finite = finite && hn::AllTrue(d, hn::IsFinite(x));
      largest = hn::Max(largest, hn::Abs(x));
    }
    const float scale = hn::GetLane(hn::MaxOfLanes(d, largest)) / 127.0f, inverse = scale != 0 ? 1.0f / scale : 0.0f;
    if (!finite || std::isinf(inverse)) {  // as the scalar loop does such blocks
      from_f32(DType::q8_0, src, dst, 32);
      continue;
    }
    const uint16_t scale16 = f32_to_f16(scale);
    std::memcpy(dst, &scale16, 2);
    for (int64_t i = 0; i < 32; i += lanes) {
      const auto x = hn::Mul(hn::LoadU(d, src + i), hn::Set(d, inverse));
      // Half away from zero, as std::round: the truncation, one more in x's direction where
      // the part cut off (exact) is at least a half.
      const auto whole = hn::Trunc(x);
      const auto up = hn::Ge(hn::Abs(hn::Sub(x, whole)), hn::Set(d, 0.5f));
      const auto q = hn::IfThenElse(up, hn::Add(whole, hn::CopySign(hn::Set(d, 1.0f), x)), whole);
      hn::StoreU(hn::DemoteTo(d8, hn::ConvertTo(di, q)), d8, reinterpret_cast<int8_t*>(dst + 2 + i));
    }
  }
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"
#include "ops/copy/convert.hpp"

namespace iron::ops::copy {

ConvertFn f32_convert_vector(DType to, const cpu::Features& f) {
  if (to == DType::f16) return IRON_HWY_PICK(f, copy, f32_to_f16_rows);
  if (to == DType::bf16) return IRON_HWY_PICK(f, copy, f32_to_bf16_rows);
  if (to == DType::q8_0) return IRON_HWY_PICK(f, copy, f32_to_q8_0_rows);
  return nullptr;
}

}  // namespace iron::ops::copy
#endif
