// Loads of a cache's or a weight's float kinds into f32 lanes, for kernels written once with
// Highway (devices/cpu/highway.hpp): included by each such file inside its per-target
// compilation (the -inl.h convention, as hwy_exp-inl.h).
// NOLINT(build/include_guard)
#if defined(IRON_DEVICES_CPU_HWY_LOAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef IRON_DEVICES_CPU_HWY_LOAD_INL_H_
#undef IRON_DEVICES_CPU_HWY_LOAD_INL_H_
#else
#define IRON_DEVICES_CPU_HWY_LOAD_INL_H_
#endif

#include <hwy/highway.h>

#include "iron/dtype.hpp"

HWY_BEFORE_NAMESPACE();
namespace iron::cpu::hwy_load {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// The lanes of `d` from p, values of T (f32, bf16 or f16), as f32.
template <DType T, class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const char* p) {
  if constexpr (T == DType::f32) {
    return hn::LoadU(d, reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::bf16) {
    const hn::Rebind<hwy::bfloat16_t, D> db;
    return hn::PromoteTo(d, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(p)));
  } else {
    static_assert(T == DType::f16);
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
}

/// The f16 at p (a block's scale) as a float.
HWY_INLINE float F16At(const char* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(h1, reinterpret_cast<const hwy::float16_t*>(p))));
}

}  // namespace HWY_NAMESPACE
}  // namespace iron::cpu::hwy_load
HWY_AFTER_NAMESPACE();

#endif  // IRON_DEVICES_CPU_HWY_LOAD_INL_H_
