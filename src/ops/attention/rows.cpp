#include "ops/attention/rows.hpp"

namespace iron::ops::attention {

#if defined(__x86_64__)
RowFn avx512_row_impl(int64_t d);  // rows_avx512.cpp, compiled for AVX-512 alone

RowFn avx512_row(int64_t d) { return avx512_row_impl(d); }
#else
// rows_avx512.cpp is built for x86-64 alone (CMakeLists.txt): elsewhere there is no row loop.
RowFn avx512_row(int64_t) { return nullptr; }
#endif

}  // namespace iron::ops::attention
