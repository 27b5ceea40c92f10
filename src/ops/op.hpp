// What every operator folder shares: the kernel interface, field access and small helpers for
// references (f32 loops) and portable kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/roundoff.hpp"
#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/error.hpp"
#include "iron/operator.hpp"

namespace iron::vulkan {
struct KernelArgs;
class CommandList;
/// Records one step's dispatches on the Vulkan device (devices/vulkan/kernel.hpp).
using KernelRecorder = void (*)(const Operator& op, const KernelArgs& args, CommandList& list);
}  // namespace iron::vulkan

// An operator's Vulkan recorder where the build has the Vulkan device (its <op>_vulkan.cpp is
// compiled), else none: the entry's line reads the same either way.
#if IRON_HAS_VULKAN
#define IRON_VULKAN_RECORDER(f) (&(f))
#else
#define IRON_VULKAN_RECORDER(f) nullptr
#endif

namespace iron::ops {

/// One of an operator's CPU kernels as its entry lists it: the target it is built for and what
/// it refuses beyond the target's features (null: nothing). The kernel itself is the operator's
/// cpu_kernel(), made with the features narrowed to the target.
struct CpuTarget {
  cpu::Target target;
  cpu::KernelRefusal refuses = nullptr;
  cpu::KernelDescription describes = nullptr;
};

/// What the catalog holds of an operator: its declaration and factory (the public catalog
/// entry), its CPU kernels (each target it has code for) and its Vulkan recorder (none: the
/// Vulkan device refuses it by name). The devices build their kernel tables from these.
struct OpEntry {
  CatalogEntry catalog;
  std::vector<CpuTarget> cpu;
  cpu::KernelFactory make_cpu;  // the operator's cpu_kernel(), for each of `cpu`
  vulkan::KernelRecorder vulkan = nullptr;
};

/// Every operator's entry (src/ops/catalog.cpp lists them).
const std::vector<OpEntry>& op_entries();

/// The factory a table entry of `Op` calls: the operator's own cpu_kernel().
template <class Op>
std::unique_ptr<cpu::Kernel> make_cpu_kernel(const Operator& op, const cpu::KernelArgs& args) {
  return static_cast<const Op&>(op).cpu_kernel(args);
}

/// The targets of an operator whose vector kernel is written once with Highway (its *_hwy.cpp,
/// devices/cpu/highway.hpp), fastest first, then its portable loops; the table keeps those this
/// build holds (built_here).
inline std::vector<CpuTarget> highway_targets() {
  return {{cpu::Target::avx512}, {cpu::Target::avx2}, {cpu::Target::sve}, {cpu::Target::neon}, {cpu::Target::portable}};
}

/// The entry of `Op`, built from its fields, whose cpu_kernel(args) serves each of `cpu`'s
/// targets, recorded on Vulkan by `vulkan`.
template <class Op>
OpEntry entry(const Declaration& d, std::vector<CpuTarget> cpu, vulkan::KernelRecorder vulkan) {
  return {{&d,
           [](Fields p, Fields t) -> std::shared_ptr<Operator> {
             return std::make_shared<Op>(std::move(p), std::move(t));
           }},
          std::move(cpu),
          &make_cpu_kernel<Op>,
          vulkan};
}

/// Valid rows times the elements of one row: what a rowwise operand covers this call.
inline int64_t valid_rows(const RefOperand& o) { return o.valid.empty() ? 1 : o.valid[0]; }
inline int64_t row_elements(const Shape& s) {
  int64_t n = 1;
  for (size_t a = 1; a < s.size(); ++a) n *= s[a];
  return n;
}

/// Rounds `n` reference values in place to `dtype`.
inline void round_all(DType dtype, float* x, int64_t n) {
  if (dtype == f32) return;
  for (int64_t i = 0; i < n; ++i) x[i] = round_to(dtype, x[i]);
}

/// Converts up to `n` elements starting at element `at` of a dense operand to f32.
/// f32 dot product with eight independent partial sums (vectorisable without reassociation flags):
/// the portable matmul's and attention's. No AVX-512 file includes this header, so the one copy
/// the linker keeps is built for the baseline.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

inline void load_row(const cpu::Operand& o, const int64_t* words, int64_t at, float* dst, int64_t n) {
  if (o.dtype == f32) {
    std::copy_n(reinterpret_cast<const float*>(o.address(words)) + at, n, dst);
    return;
  }
  to_f32(o.dtype, o.address(words, at), dst, n);
}

inline void store_row(const cpu::Operand& o, const int64_t* words, int64_t at, const float* src, int64_t n) {
  if (o.dtype == f32) {
    std::copy_n(src, n, reinterpret_cast<float*>(o.address(words)) + at);
    return;
  }
  from_f32(o.dtype, src, o.address(words, at), n);
}

}  // namespace iron::ops
