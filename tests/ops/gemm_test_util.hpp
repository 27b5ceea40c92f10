// What the matmul kernel tests share: a dense operand over a host buffer, and running a kernel
// on the pool.
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

struct Run {
  const cpu::Kernel* kernel;
  const int64_t* words;
};
inline void job(void* context, int thread, int threads) {
  auto* r = static_cast<Run*>(context);
  r->kernel->run(r->words, thread, threads);
}

}  // namespace iron::gemm_testing
