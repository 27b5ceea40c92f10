// What `iron info --kernels` prints: for the steps the models run (each weight kind of a matmul,
// each cache type of attention, at highest and medium), the CPU kernel the table picks and why
// the faster ones were passed over.
#pragma once

#include <string>
#include <vector>

#include "ops/op.hpp"

namespace iron::ops {

/// One step as a model records it: the operator, its params and tunables, its operands' dtypes.
struct KernelCase {
  std::string op;
  std::string step;  // "q4_1 weight, f32 rows, medium"
  Fields params, tunables;
  std::vector<DType> in, out;
  Precision precision = Precision::highest;
};

struct KernelReportLine {
  KernelCase step;
  cpu::KernelChoice choice;
  std::string how;  // the chosen kernel's way with this step (KernelEntry::describes), or empty
};

/// The steps the models run, by operator.
std::vector<KernelCase> model_kernel_cases();
/// The CPU table's choice for each, on a processor with `features`.
std::vector<KernelReportLine> choose_cpu_kernels(const cpu::Features& features);
/// Those choices as lines of text, then the operators with one kernel.
std::string describe_cpu_kernels(const cpu::Features& features);
/// Which operators the Vulkan device records.
std::string describe_vulkan_kernels();

}  // namespace iron::ops
