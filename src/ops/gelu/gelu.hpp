// GELU's row function, shared by the GELU operator's kernel and the matmul epilogue (a GELU the
// planner folds into the matmul before it then gives the same bits), and the f32 erf both take.
#pragma once

#include <cstdint>

#include "devices/cpu/kernel.hpp"

namespace iron::ops {

/// GELU over n f32 values in place, as the GELU kernel computes it on a processor with `f`:
/// exact (x Phi(x)) or, with `tanh`, the tanh form. With AVX-512 or AVX2 both are f32 vector
/// code (gelu_hwy.cpp: erf_f32's polynomials; the tanh form as x / (1 + e^(-2u))); on the
/// portable path each value goes through the double formula the reference uses.
void gelu_rows(float* v, int64_t n, bool tanh, const cpu::Features& f);
/// GELU of one value in double: the reference's, and the portable loop's before rounding.
double gelu_double(double v, bool tanh);
/// The vector code of gelu_rows, where `f` runs one of its targets; false (nothing done) where not.
bool gelu_rows_vector(float* v, int64_t n, bool tanh, const cpu::Features& f);

/// erf in f32 for the vector paths: |x| in 8 intervals of 1/2 over [0, 4), each a degree-9
/// polynomial in x less the interval's centre (fitted on Chebyshev nodes; within 7e-8 of erf,
/// about an ulp of 0.5), and 1 from 4 on (erf(4) is 1 - 1.5e-8). kErfPoly[d][i] is interval
/// i's coefficient of degree d: one table row per vector register, each interval a lane to
/// permute in (16 floats a row, the last 8 zero, so a vector of 16 lanes loads a row whole).
constexpr int kErfDegree = 9;
extern const float kErfPoly[kErfDegree + 1][16];
/// The same polynomials, one value at a time (what the vector paths compute, lane by lane).
float erf_f32(float x);


}  // namespace iron::ops
