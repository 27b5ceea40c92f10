// CPU kernels written once with Google Highway (Debian's libhwy-dev, headers only).
//
// A file of such kernels (`src/ops/<op>/<name>_hwy.cpp`) defines them in
// `namespace <its namespace>::HWY_NAMESPACE` and includes devices/cpu/hwy_each_target.h (which
// shows the form such a file takes) and so hwy/foreach_target.h, which compiles
// the file once for each target this build asks of Highway (AVX-512 as N_AVX3 and AVX2 as N_AVX2
// on x86-64, NEON as N_NEON and SVE as N_SVE on aarch64: CMakeLists.txt turns the others off),
// each copy with its own instruction set enabled by function attributes, so no
// file needs its own compiler flags. Its `#if HWY_ONCE` part then picks a copy with
// IRON_HWY_PICK from the features the kernel table gave the kernel (never with Highway's own
// dispatch, which would ignore IRON_CPU and the table's choice): what `iron info --kernels`
// reports is what runs. A target with no copy picked falls back to the portable loops.
#pragma once

#include <hwy/highway.h>

#include "devices/cpu/kernel.hpp"

namespace iron::cpu {

/// Whether `f` runs Highway's AVX-512 copy (its AVX3 target: F, VL, DQ and BW) and its AVX2
/// copy (AVX2, FMA, F16C; BMI2, which every AVX2 processor made has).
inline bool hwy_avx3(const Features& f) { return f.avx512f && f.avx512vl && f.avx512dq && f.avx512bw; }
inline bool hwy_avx2(const Features& f) { return f.avx2 && f.fma && f.f16c; }

/// Runs `copy` (what IRON_HWY_PICK chose) on `args`; false, running nothing, where none was
/// chosen: the caller's portable loops then serve.
template <class Fn, class... Args>
bool run_picked(Fn* copy, Args... args) {
  if (!copy) return false;
  copy(args...);
  return true;
}

}  // namespace iron::cpu

// The copy of function `fn` in namespace `ns` (`ns::N_AVX3::fn`, ...) for a processor with
// features `f`, or nullptr where none of this build's targets runs there (the caller's portable
// loops then serve).
#if HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX3) && (HWY_TARGETS & HWY_AVX2)
#define IRON_HWY_PICK(f, ns, fn) \
  (::iron::cpu::hwy_avx3(f) ? &ns::N_AVX3::fn : ::iron::cpu::hwy_avx2(f) ? &ns::N_AVX2::fn : nullptr)
#elif HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX2)
// A test build for a processor without AVX-512 (CMakeLists.txt, IRON_HOST_KERNELS): AVX2's copy.
#define IRON_HWY_PICK(f, ns, fn) (::iron::cpu::hwy_avx2(f) ? &ns::N_AVX2::fn : nullptr)
#elif HWY_ARCH_ARM_A64 && (HWY_TARGETS & HWY_SVE) && (HWY_TARGETS & HWY_NEON)
// SVE's copy is built for any vector length (the kernels ask the lanes at run time); every SVE
// processor has NEON too.
#define IRON_HWY_PICK(f, ns, fn) ((f).sve_bits > 0 ? &ns::N_SVE::fn : (f).neon ? &ns::N_NEON::fn : nullptr)
#else
// Another architecture: the portable loops serve.
#define IRON_HWY_PICK(f, ns, fn) ((void)(f), static_cast<decltype(&ns::HWY_STATIC_DISPATCH(fn))>(nullptr))
#endif
