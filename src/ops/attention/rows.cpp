#include "ops/attention/rows.hpp"

namespace iron::ops::attention {

RowFn avx512_row_impl(int64_t d);  // rows_avx512.cpp, compiled for AVX-512 alone

RowFn avx512_row(int64_t d) { return avx512_row_impl(d); }

}  // namespace iron::ops::attention
