// The public sampling settings (include/iron/sampling.hpp): their checks and their row of words.
// The row is the Sample operator's settings operand, so its encoding is defined here, beside
// the decoding the operator's kernels do (sample.hpp): the graph layer's functional::sample()
// and sample_settings() reach the layout through the public SamplingRow alone, never through
// ops/ (graph/ must not include it).
#include <cmath>
#include <cstdint>
#include <string>

#include "iron/error.hpp"
#include "iron/sampling.hpp"
#include "ops/sample/sample.hpp"

namespace iron {

void Sampling::check() const {
  if (!(temperature >= 0) || std::isinf(temperature))
    value_error("sampling temperature is a finite number >= 0, got " + std::to_string(temperature));
  if (top_k < 0 || top_k > INT32_MAX) value_error("sampling top_k is in [0, 2^31), got " + std::to_string(top_k));
  if (!(top_p > 0 && top_p <= 1)) value_error("sampling top_p is in (0, 1], got " + std::to_string(top_p));
}

SamplingRow::SamplingRow(const Sampling& s) {
  s.check();
  ops::encode_settings(s, words.data());
}

}  // namespace iron
