// Running a recording on the host through each step's reference(): the graph's reference()
// and check mode's per-step comparisons share this.
#pragma once

#include <map>
#include <span>
#include <vector>

#include "graph/recording.hpp"
#include "iron/graph.hpp"

namespace iron::detail {

/// `h` over `buffer` (its whole buffer as f32), with per-call offsets and bounds evaluated.
RefOperand reference_operand(const Handle& h, float* buffer, const int64_t* words,
                             const std::vector<int64_t>* rows);

/// Host copies of states, kept across reference calls as the device keeps its states.
using ReferenceStates = std::map<const Resident*, std::vector<float>>;

/// Runs every step's reference, and host steps between them; outputs are f32 tensors cut to
/// their leading-axis bounds, with the carried values' next values.
RunResult run_reference(const Recording& recording, std::span<const Tensor> tensors,
                                  const int64_t* words, ReferenceStates& states);

}  // namespace iron::detail
