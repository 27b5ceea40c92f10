// The CPU's program: its kernels, run by the shared pool in phases (devices/cpu/program.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "graph/device.hpp"

namespace iron::cpu {

/// Bytes a kernel reads and writes at its largest: with its multiply-adds, what decides whether
/// it is split across threads.
int64_t bytes_touched(const KernelArgs& args);

/// A program of `kernels` (named for traces); `barrier_before[i]`: kernel i waits for the ones
/// before it; `bytes[i]`: bytes_touched of kernel i's arguments.
std::unique_ptr<detail::Program> make_program(std::vector<std::unique_ptr<Kernel>> kernels, std::vector<std::string> names,
                                              const std::vector<bool>& barrier_before, const std::vector<int64_t>& bytes,
                                              int threads);

}  // namespace iron::cpu
