// The packed sub-block scales and minimums of ggml's Q4_K and Q5_K super-blocks, read by to_f32
// (dtype.cpp) and by the int8 matmul layout's packer (ops/gemm/packed_int8.cpp). Both are built
// for the baseline instruction set.
#pragma once

#include <cstdint>

namespace iron {

/// Sub-block j (0..7): its 6-bit scale and minimum from the 12 packed bytes (j < 4: the low 6
/// bits of bytes j and j + 4; else a nibble of byte j + 4 under the top 2 bits of bytes j - 4
/// and j).
inline void k_scale_min(int j, const uint8_t* packed, uint8_t* scale, uint8_t* minimum) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *minimum = packed[j + 4] & 63;
  } else {
    *scale = uint8_t((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    *minimum = uint8_t((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

}  // namespace iron
