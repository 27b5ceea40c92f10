// Memory for what kernels make of weights at lowering (their prepared forms): long-lived and
// read on every call, so it is backed by huge pages where the system allows. A decode step
// sweeps every weight once; in 4 KiB pages that is a TLB miss every 4 KiB (about 25,000 a token
// for a 100 MiB model), in 2 MiB pages a few dozen.
#pragma once

#include <cstddef>
#include <memory>

namespace iron::cpu {

/// `bytes` of memory, 64-byte aligned and zeroed, alive while the pointer (or a copy) is. Small
/// requests share 2 MiB-aligned chunks; large ones get their own.
std::shared_ptr<char> weight_memory(size_t bytes);

}  // namespace iron::cpu
