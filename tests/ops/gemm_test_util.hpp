// What the matmul kernel tests share: a dense operand over a host buffer (they run kernels with
// cpu::run_kernel).
#pragma once

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/handle.hpp"

namespace iron::gemm_testing {

/// A contiguous operand over `base`, its leading axis bounded by `rows`.
inline cpu::Operand operand(DType t, const Shape& shape, char* base, cpu::WordRef rows) {
  cpu::Operand o;
  o.base = base;
  o.dtype = t;
  o.shape = shape;
  o.strides = contiguous_strides(shape);
  o.offset = {-1, 0};
  for (int64_t d : shape) o.valid.push_back({-1, d});
  if (!shape.empty()) o.valid[0] = rows;
  return o;
}

}  // namespace iron::gemm_testing
