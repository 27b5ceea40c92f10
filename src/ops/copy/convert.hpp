// Copy's conversions from f32 into the 2-byte types in 8 lanes (AVX2 with F16C), for the copies
// that write a decode step's keys and values into f16 or bf16 caches. With the scalar loops
// (iron::from_f32) a batched step of 8 rows spent 8.8-10.4 us a layer on each of its two cache
// copies, on one thread while the other waited; 4.9-6.9 us with these (bench_batch_decode ...
// medium TRACE.json). Bit for bit iron::f32_to_f16 and iron::f32_to_bf16
// (round to nearest even, NaN as they write it).
#pragma once

#include <cstdint>

namespace iron::ops::copy {

using ConvertFn = void (*)(const float* src, uint16_t* dst, int64_t n);

/// The CPU must have AVX2 and F16C.
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n);

}  // namespace iron::ops::copy
