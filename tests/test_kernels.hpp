// Operators a test defines outside the catalog: their CPU kernel, added to the device's table.
#pragma once

#include "devices/cpu/kernel_table.hpp"
#include "ops/op.hpp"

namespace iron::test {

/// Adds `Op`'s cpu_kernel() to the CPU kernel table under `Op`'s declared name, once (call it
/// from the operator's constructor: recording comes before lowering).
template <class Op>
void add_test_kernel(const Declaration& d) {
  static const bool added = [&] {
    cpu::add_kernel({d.name, cpu::Target::portable, nullptr, &ops::make_cpu_kernel<Op>});
    return true;
  }();
  (void)added;
}

}  // namespace iron::test
