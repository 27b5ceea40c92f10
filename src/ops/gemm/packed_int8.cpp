// W rearranged for the int8 path (the layout is described in kernels.hpp): plain loops, run once
// per weight when the first kernel that wants it is made.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/k_quants.hpp"
#include "devices/cpu/weight_memory.hpp"
#include "iron/error.hpp"
#include "iron/io/mapped_file.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

// Bytes of one block (K-quants: super-block) of one row as the file stores it.
int64_t source_block_bytes(DType t) { return info(t).bytes; }

// Row j's 32 quants of one block (below 16, 32 or 64: `High` bits above the nibble) into their
// group's loads at `quants`: columns 8c + i and 8c + 4 + i to the low and high nibbles of byte
// 4j + i of load c, then their bits above: one (a fifth bit) to bits 2c and 2c + 1 of byte
// 4j + i of load 4, two (q6_k) to bits 4 (c % 2) and 4 (c % 2) + 2 of byte 4j + i of load
// 4 + c / 2.
template <int High>
void place_quants(const uint8_t* col, int64_t j, uint8_t* quants) {
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 4; ++i) {
      const uint8_t low = col[8 * c + i], high = col[8 * c + 4 + i];
      quants[64 * c + 4 * j + i] = uint8_t((low & 15) | (high & 15) << 4);
      if (High == 1) quants[256 + 4 * j + i] |= uint8_t((low >> 4) << (2 * c) | (high >> 4) << (2 * c + 1));
      if (High == 2)
        quants[256 + 64 * (c / 2) + 4 * j + i] |= uint8_t((low >> 4) << (4 * (c % 2)) | (high >> 4) << (4 * (c % 2) + 2));
    }
}

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
    // GGUF's 4- and 5-bit blocks: byte i holds column i (low nibble) and column i + 16 (high
    // nibble); bit i of the 4 bytes before them column i's fifth bit.
    uint32_t bits = 0;
    if (int8_fifth(T)) std::memcpy(&bits, qs - 4, 4);
    uint8_t col[32];
    for (int i = 0; i < 32; ++i)
      col[i] = uint8_t((i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4) | ((bits >> i) & 1) << 4);
    place_quants<int8_fifth(T) ? 1 : 0>(col, j, quants);
  }
}

// One super-block of one row of a K-quant into its place in a group (kernels.hpp): the 8
// sub-blocks' quants, then row j's d, and dmin, scales and minimums (q6_k: scales) in the
// super-block's header.
template <DType T>
void pack_row_super(const uint8_t* src, int64_t j, uint8_t* super) {
  uint8_t* header = super + 8 * int8_quant_bytes(T);
  uint8_t col[32];
  if constexpr (T == DType::q6_k) {
    // Sub-block s = 4h + c: low (c < 2) or high nibbles of 32 bytes at 64h + 32 (c % 2), with
    // bits 2c, 2c + 1 of the 32 bytes at 128 + 32h above them.
    std::memcpy(header + 2 * j, src + 208, 2);
    for (int t = 0; t < 16; ++t) header[32 + 16 * t + j] = src[192 + t];
    for (int s = 0; s < 8; ++s) {
      const int h = s / 4, c = s % 4;
      for (int l = 0; l < 32; ++l)
        col[l] = uint8_t(((src[64 * h + 32 * (c % 2) + l] >> (4 * (c / 2))) & 0x0f) |
                         ((src[128 + 32 * h + l] >> (2 * c)) & 3) << 4);
      place_quants<2>(col, j, super + s * int8_quant_bytes(T));
    }
    return;
  }
  const uint8_t* packed = src + 4;
  const uint8_t* fifth = src + 16;
  const uint8_t* qs = src + (int8_fifth(T) ? 48 : 16);
  std::memcpy(header + 2 * j, src, 2);
  std::memcpy(header + 32 + 2 * j, src + 2, 2);
  for (int s = 0; s < 8; ++s) {
    // Sub-block s: the low (s even) or high nibbles of 32 bytes, and bit s of each fifth-bit byte.
    for (int l = 0; l < 32; ++l)
      col[l] = uint8_t(((qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f) | (int8_fifth(T) ? ((fifth[l] >> s) & 1) << 4 : 0));
    place_quants<int8_fifth(T) ? 1 : 0>(col, j, super + s * int8_quant_bytes(T));
    uint8_t scale, minimum;
    k_scale_min(s, packed, &scale, &minimum);
    header[64 + 16 * s + j] = uint8_t(scale | (minimum & 3) << 6);
    header[192 + 16 * (s / 2) + j] |= uint8_t((minimum >> 2) << (4 * (s % 2)));
  }
}

template <DType T>
void pack_all(const char* w, int64_t row_bytes, int64_t n, int64_t k, char* out) {
  const int64_t groups = (n + kInt8Rows - 1) / kInt8Rows, group_bytes = PackedInt8::group_bytes(k, T);
  // Rows past n (the last group's padding) and an odd last block's partner stay zero.
  std::memset(out, 0, size_t(groups * group_bytes));
  for (int64_t g = 0; g < groups; ++g) {
    auto* group = reinterpret_cast<uint8_t*>(out + g * group_bytes);
    for (int64_t j = 0; j < kInt8Rows && g * kInt8Rows + j < n; ++j) {
      const auto* row = reinterpret_cast<const uint8_t*>(w + (g * kInt8Rows + j) * row_bytes);
      if constexpr (int8_k(T)) {
        for (int64_t s = 0; s < k / 256; ++s)
          pack_row_super<T>(row + s * source_block_bytes(T), j, group + s * int8_super_bytes(T));
      } else {
        for (int64_t b = 0; b < k / 32; ++b)
          pack_row_block<T>(row + b * source_block_bytes(T), j, group + int8_quants_at(T, b),
                            group + int8_d_at(T, b), group + int8_m_at(T, b));
      }
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
    case DType::q4_k:
      return pack_all<DType::q4_k>(w, row_bytes, n, k, out);
    case DType::q5_k:
      return pack_all<DType::q5_k>(w, row_bytes, n, k, out);
    case DType::q6_k:
      return pack_all<DType::q6_k>(w, row_bytes, n, k, out);
    default:
      value_error(std::string("pack_int8: no int8 layout for ") + std::string(name(t)));
  }
}

std::shared_ptr<const PackedInt8> packed_int8(const cpu::Operand& w, int64_t n, int64_t k) {
  if (!w.prepared || w.offset.per_call() || !int8_weight(w.dtype) || k % info(w.dtype).block != 0) return nullptr;
  const char* source = w.address(nullptr);
  const int64_t row_bytes = k / info(w.dtype).block * source_block_bytes(w.dtype);
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
