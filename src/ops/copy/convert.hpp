// Copy's conversions from f32 into the 2-byte types and q8_0 in vector lanes (convert_hwy.cpp),
// for the copies that write a step's keys and values into f16, bf16 or q8_0 caches. With the scalar
// loops (iron::from_f32) a batched step of 8 rows spent 8.8-10.4 us a layer on each of its two
// cache copies, on one thread while the other waited; 4.9-6.9 us with AVX2's (bench_batch_decode
// ... medium TRACE.json). Bit for bit iron::f32_to_f16 and iron::f32_to_bf16 (round to nearest
// even, NaN as they write it).
#pragma once

#include <cstdint>

#include "devices/cpu/kernel.hpp"
#include "iron/dtype.hpp"

namespace iron::ops::copy {

using ConvertFn = void (*)(const float* src, void* dst, int64_t n);

/// The vector conversion of n values from f32 into `to` (f16, bf16, or q8_0: n whole blocks)
/// for a processor with features `f`; nullptr for another type or where no vector target runs
/// (the scalar loops then serve).
ConvertFn f32_convert_vector(DType to, const cpu::Features& f);

}  // namespace iron::ops::copy
