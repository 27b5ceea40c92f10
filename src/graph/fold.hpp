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

/// Folds what reads a matmul's output into the matmul when that step is its only reader: a
/// bias (an Add of a resident f32 row of N, broadcast), a residual (an Add of a tensor of the
/// output's shape written before the matmul) and, when `with_activations`, a GELU (a
/// ProjectionGEMM's epilogue; not where another matmul reads the same `a`, which merging with it
/// serves better). Each is applied to the f32 sums in the order the steps ran (bias,
/// activation, residual) before the one store, so the result is bitwise the unfolded
/// recording's (the GELU through the GELU kernel's own row function), with one pass over the
/// output instead of one per step. A chain folds link by link (a Linear's bias, then its GELU).
/// Returns the number of steps folded in.
int fold_epilogues(Recording& recording, Recorder& recorder, bool with_activations);

/// Merges consecutive matmuls over the same `a` (the same op and params but their weights' rows,
/// no residual: a block's q, k and v, or gate and up) into one step of several weights, whose
/// threads split the weights' rows as one list: one phase and one long run of weight bytes per
/// thread where each matmul was a phase with a short run. A merged pair that a SwiGLU reads and
/// nothing else takes the SwiGLU in too when `with_swiglu` (each thread finishes silu(gate) * up
/// on its own rows). Its result is bitwise the SwiGLU step's, but it has no reference of its
/// own that a check-mode comparison could hold it to: the product compounds the two matmuls'
/// rounding beyond either's tolerance. Returns the number of steps removed.
int merge_matmuls(Recording& recording, Recorder& recorder, bool with_swiglu);

}  // namespace iron
