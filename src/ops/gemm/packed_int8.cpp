// W rearranged for the int8 path (the layout is described in kernels.hpp): plain loops, run once
// per weight when the first kernel that wants it is made.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "devices/cpu/weight_memory.hpp"
#include "iron/error.hpp"
#include "iron/io/mapped_file.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

// Bytes of one block of one row as the file stores it: d (f16), q4_1's and q5_1's m (f16),
// q5_0's and q5_1's fifth bits (4 bytes), the quants.
int64_t source_block_bytes(DType t) { return info(t).bytes; }

// One block of one row (`src`, as the file stores it) into its place in a group: row j of the
// quants at `quants`, its d (and m) into the group's scale arrays.
template <DType T>
void pack_row_block(const uint8_t* src, int64_t j, uint8_t* quants, uint8_t* d, uint8_t* m) {
  std::memcpy(d + 2 * j, src, 2);
  if constexpr (int8_minimum(T)) std::memcpy(m + 2 * j, src + 2, 2);
  const uint8_t* qs = src + source_block_bytes(T) - (T == DType::q8_0 ? 32 : 16);
  if constexpr (T == DType::q8_0) {
    // Column 4c + i to byte 4j + i of load c, shifted to unsigned.
    for (int c = 0; c < 8; ++c)
      for (int i = 0; i < 4; ++i) quants[64 * c + 4 * j + i] = uint8_t(qs[4 * c + i] ^ 0x80);
  } else {
    // GGUF's 4-bit blocks: byte i holds column i (low nibble) and column i + 16 (high nibble).
    uint8_t col[32];
    for (int i = 0; i < 16; ++i) col[i] = qs[i] & 0x0f, col[i + 16] = qs[i] >> 4;
    // Columns 8c + i and 8c + 4 + i to the low and high nibbles of byte 4j + i of load c.
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i)
        quants[64 * c + 4 * j + i] = uint8_t(col[8 * c + i] | col[8 * c + 4 + i] << 4);
    if constexpr (int8_fifth(T)) {
      // Their fifth bits to bits 2c and 2c + 1 of byte 4j + i of the fifth load.
      uint32_t bits;
      std::memcpy(&bits, qs - 4, 4);
      for (int c = 0; c < 4; ++c)
        for (int i = 0; i < 4; ++i)
          quants[256 + 4 * j + i] |= uint8_t(((bits >> (8 * c + i)) & 1) << (2 * c) |
                                             ((bits >> (8 * c + 4 + i)) & 1) << (2 * c + 1));
    }
  }
}

template <DType T>
void pack_all(const char* w, int64_t row_bytes, int64_t n, int64_t k, char* out) {
  const int64_t blocks = k / 32;
  const int64_t groups = (n + kInt8Rows - 1) / kInt8Rows, group_bytes = PackedInt8::group_bytes(k, T);
  // Rows past n (the last group's padding) and an odd last block's partner stay zero.
  std::memset(out, 0, size_t(groups * group_bytes));
  for (int64_t g = 0; g < groups; ++g) {
    auto* group = reinterpret_cast<uint8_t*>(out + g * group_bytes);
    for (int64_t j = 0; j < kInt8Rows && g * kInt8Rows + j < n; ++j) {
      const auto* row = reinterpret_cast<const uint8_t*>(w + (g * kInt8Rows + j) * row_bytes);
      for (int64_t b = 0; b < blocks; ++b)
        pack_row_block<T>(row + b * source_block_bytes(T), j, group + int8_quants_at(T, b),
                          group + int8_d_at(T, b), group + int8_m_at(T, b));
    }
  }
}

}  // namespace

void pack_int8(DType t, const char* w, int64_t row_bytes, int64_t n, int64_t k, char* out) {
  switch (t) {
    case DType::q8_0:
      return pack_all<DType::q8_0>(w, row_bytes, n, k, out);
    case DType::q4_0:
      return pack_all<DType::q4_0>(w, row_bytes, n, k, out);
    case DType::q4_1:
      return pack_all<DType::q4_1>(w, row_bytes, n, k, out);
    case DType::q5_0:
      return pack_all<DType::q5_0>(w, row_bytes, n, k, out);
    case DType::q5_1:
      return pack_all<DType::q5_1>(w, row_bytes, n, k, out);
    default:
      value_error(std::string("pack_int8: no int8 layout for ") + std::string(name(t)));
  }
}

std::shared_ptr<const PackedInt8> packed_int8(const cpu::Operand& w, int64_t n, int64_t k) {
  if (!w.prepared || w.offset.per_call() || !int8_weight(w.dtype) || k % 32 != 0) return nullptr;
  const char* source = w.address(nullptr);
  const int64_t row_bytes = k / 32 * source_block_bytes(w.dtype);
  // One form per place in the weight (a view may start past its first row) and shape.
  const std::string key = "int8x16 " + std::to_string(source - w.base) + " " +
                          std::to_string(n) + "x" + std::to_string(k);
  auto form = w.prepared->get(key, [&]() -> PreparedForms::Form {
    auto packed = std::make_shared<PackedInt8>();
    packed->groups = (n + kInt8Rows - 1) / kInt8Rows;
    const size_t bytes = size_t(packed->groups * PackedInt8::group_bytes(k, w.dtype));
    packed->bytes = cpu::weight_memory(bytes);
    // Slice by slice, each slice's pages of the file released once copied: the kernels read the
    // copy from now on, so the weight is never held twice, not even while it is rearranged.
    // Rows read elsewhere (a tied embedding's gather) are mapped again as they are touched.
    constexpr int64_t kSliceRows = 64 * kInt8Rows;
    const int64_t group_bytes = PackedInt8::group_bytes(k, w.dtype);
    for (int64_t r = 0; r < n; r += kSliceRows) {
      const int64_t rows = std::min(kSliceRows, n - r);
      pack_int8(w.dtype, source + r * row_bytes, row_bytes, rows, k,
                packed->bytes.get() + r / kInt8Rows * group_bytes);
      io::MappedFile::release_pages(source + r * row_bytes, size_t(rows * row_bytes));
    }
    return packed;
  });
  return std::static_pointer_cast<const PackedInt8>(form);
}

}  // namespace iron::ops::gemm
