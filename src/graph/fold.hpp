// Planner rewrites of a recording that change how it runs, never what it computes.
#pragma once

#include "graph/recording.hpp"

namespace iron {

/// Folds each RMSNorm whose output only matmuls read (GEMM, ProjectionGEMM, GEMV, as their `a`)
/// into those matmuls: each normalises the rows it reads itself, by the same row function, so
/// the results are bitwise those of the unfolded recording. A decode step's norm is one row: run
/// on its own it is a phase of its own, a thread working for a microsecond while the others wait
/// at two barriers; folded, every thread of each matmul recomputes it (a few hundred adds)
/// instead. Returns the number of norms folded.
int fold_norms(Recording& recording, Recorder& recorder);

}  // namespace iron
