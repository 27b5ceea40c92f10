// e^x over Highway's vector lanes, for kernels written once with Highway (devices/cpu/highway.hpp):
// included by each such file inside its per-target compilation (the -inl.h convention: the guard
// flips with HWY_TARGET_TOGGLE, so every target gets its own copy).
// NOLINT(build/include_guard)
#if defined(IRON_DEVICES_CPU_HWY_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef IRON_DEVICES_CPU_HWY_EXP_INL_H_
#undef IRON_DEVICES_CPU_HWY_EXP_INL_H_
#else
#define IRON_DEVICES_CPU_HWY_EXP_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace iron::cpu::hwy_math {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// e^x to about 2 ulp for x in [-87.3, 88.3] (held there): x = n ln2 + r with |r| <= ln2/2 (ln2
// split in two for exactness), a degree-6 polynomial for e^r, and 2^n made in the exponent bits
// (n in [-126, 127], a normal float). Highway's own Exp (contrib/math) took four times as long
// here: it covers the whole range and is not inlined.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Exp(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Min(hn::Max(x, hn::Set(d, -87.3f)), hn::Set(d, 88.3f));
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  V p = hn::Set(d, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // AVX-512 scales by 2^n in one instruction (vscalefps), where the exponent bits take three:
  // SwiGLU over a SmolLM2 prefill's feed-forward rows was 2% slower without it.
  if constexpr (sizeof(hn::TFromD<D>) == 4 && hn::MaxLanes(d) == 16) return V{_mm512_scalef_ps(p.raw, n.raw)};
#endif
  // n + 127 in the low bits of a float near 2^23, shifted into the exponent (no checked
  // conversion to int, which cost a tenth of GELU's time).
  const V two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, hn::Add(n, hn::Set(d, 8388608.0f + 127.0f)))));
  return hn::Mul(p, two_n);
}

}  // namespace HWY_NAMESPACE
}  // namespace iron::cpu::hwy_math
HWY_AFTER_NAMESPACE();

#endif  // IRON_DEVICES_CPU_HWY_EXP_INL_H_
