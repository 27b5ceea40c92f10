// What a file of kernels written once with Highway (devices/cpu/highway.hpp) includes after
// defining HWY_TARGET_INCLUDE as its own path (under src/):
//
//   #define HWY_TARGET_INCLUDE "ops/gelu/gelu_hwy.cpp"
//   #include "devices/cpu/hwy_each_target.h"
//   #if IRON_HWY_PICKED_PASS
//   IRON_HWY_BEGIN(iron::ops::gelu_hwy)
//   ... this target's kernels, `hn` naming its operations ...
//   IRON_HWY_END
//   #endif
//   #if HWY_ONCE
//   ... the copies picked with IRON_HWY_PICK (devices/cpu/highway.hpp) ...
//   #endif
//
// foreach_target.h includes the file again once per target this build asks for, each pass with
// HWY_TARGET set; IRON_HWY_BEGIN opens `ns`::HWY_NAMESPACE (that target's namespace) with its
// instruction set enabled on every function inside, and IRON_HWY_END closes it.
//
// No include guard: highway.h must be seen again on each target's pass (it defines that target's
// operations); foreach_target.h has its own and runs once.
// NOLINT(build/header_guard)
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef IRON_HWY_BEGIN
// Expanded where used, so HWY_NAMESPACE and the attributes are that pass's target's.
#define IRON_HWY_BEGIN(ns)  \
  HWY_BEFORE_NAMESPACE();   \
  namespace ns {            \
  namespace HWY_NAMESPACE { \
  namespace hn = hwy::HWY_NAMESPACE;
#define IRON_HWY_END \
  }                  \
  }                  \
  HWY_AFTER_NAMESPACE();
// Whether this pass's target is one IRON_HWY_PICK (devices/cpu/highway.hpp) can choose: a file's
// kernels are compiled only in such passes (`#if IRON_HWY_PICKED_PASS` around them). Highway also
// compiles every file for the build's baseline, EMU128 on x86-64 (128-bit vectors emulated by
// scalar loops), which nothing picks: the portable loops serve processors without AVX2. That
// copy was most of a kernel file's compile time (gemm_hwy.cpp under clang's ASan: 72 s with it,
// 17 s without). On other architectures the baseline copy is the one picked.
#if HWY_ARCH_X86
#define IRON_HWY_PICKED_PASS (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2)
#elif HWY_ARCH_ARM_A64
#define IRON_HWY_PICKED_PASS (HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_NEON)
#else
#define IRON_HWY_PICKED_PASS 1
#endif
#endif
