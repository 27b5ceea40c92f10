// How far a matmul may round beyond its reference, named as torch.set_float32_matmul_precision
// names them. Each level allows the one above's roundings and more.
#pragma once

#include <string>
#include <string_view>

namespace iron {

enum class Precision {
  highest,  // f32 partial sums, rounded once to the output's type
  high,     // partial sums rounded to the output's type per K tile (or inputs rounded to bf16)
  medium,   // inputs rounded to a block format (bf16 pairs, int8 blocks) where the device has it
};

std::string_view name(Precision p);
Precision precision_from_name(std::string_view name);

/// The contract a kernel is tested against: |out - ref| <= atol + rtol * |ref|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  bool admits(double out, double ref) const;
};

}  // namespace iron
