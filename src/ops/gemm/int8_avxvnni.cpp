// The int8 path's loops (int8_avx2_loops.hpp) with AVX-VNNI's 256-bit vpdpbusd (Intel Alder
// Lake and later, AMD Zen 5): each block's int32 sums in one instruction per operand where AVX2
// takes vpmaddubsw, int16 partial sums and vpmaddwd. x is quantised by quantise_x8_avx2 and W
// read in the same layout, and the sums are the same exact int32 values, so the outputs are the
// AVX2 loops' bits (GemmInt8.AvxVnniGivesTheAvxTwoLoopsBits).
#include <immintrin.h>

#include "ops/gemm/int8_avx2_loops.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

void gemm_int8_avxvnni(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { int8_groups<Avx2Lanes<true>, decltype(kind)::value>(g); });
}

}  // namespace iron::ops::gemm
