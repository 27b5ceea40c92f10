// bf16 matmul tiles on AMX (Precision::medium where AMX-BF16 runs: Sapphire Rapids and later).
// One TDPBF16PS multiplies a 16 x 32 bf16 tile of a by a 32 x 16 tile of W (bf16 pairs) into 16
// x 16 f32 sums: 8192 products, where one vdpbf16ps does 32. An encoder's prefill (thousands of
// rows through 384- to 1536-wide layers) is bound by these products; on the AVX-512 loops it was
// almost half of all-MiniLM-L6-v2's time.
//
// Eight tile registers: four sums (32 rows x 32 columns), two of a (rows 0-15 and 16-31), two of
// W (columns 0-15 and 16-31), so each step loads four tiles for four products. W's tiles are the
// AVX-512 loops' packed bf16 pairs as they are: a pair row of a packed tile is 32 columns of
// (even k, odd k), 128 bytes, and its first (last) 64 bytes are a W tile's row for columns 0-15
// (16-31). Built with -mamx-tile -mamx-bf16 (CMakeLists: files named *_amx.cpp); called only
// where cpu::Features says the OS lets this process use the tiles.
#include <immintrin.h>

#include <cstdint>

#include "devices/cpu/amx.hpp"
#include "ops/gemm/kernels.hpp"

namespace iron::ops::gemm {

namespace {

constexpr int64_t kCols = 32;  // columns of a packed tile (the AVX-512 loops' nr)

// Sums of 16 (or 32) rows of a, from `a`, by one packed tile `b`, into c (ldc floats a row).
template <bool kTwo>
void block(const uint16_t* a, int64_t lda, const uint16_t* b, int64_t pairs, float* c, int64_t ldc) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwo) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t a_stride = lda * 2, b_stride = kCols * 2 * 2;
  for (int64_t p = 0; p < pairs; p += 16) {
    _tile_loadd(4, a + 2 * p, a_stride);
    if constexpr (kTwo) _tile_loadd(5, a + 16 * lda + 2 * p, a_stride);
    _tile_loadd(6, b + p * kCols * 2, b_stride);
    _tile_loadd(7, b + p * kCols * 2 + 32, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwo) {
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  const int64_t c_stride = ldc * 4;
  _tile_stored(0, c, c_stride);
  _tile_stored(1, c + 16, c_stride);
  if constexpr (kTwo) {
    _tile_stored(2, c + 16 * ldc, c_stride);
    _tile_stored(3, c + 16 * ldc + 16, c_stride);
  }
}

}  // namespace

void tile_bf16_amx(const TileAmxArgs& t) {
  cpu::amx::configure_full_tiles();
  for (int64_t m = 0; m < t.m; m += 2 * kAmxRows) {
    const uint16_t* a = t.a + m * t.lda;
    for (int64_t tile = 0; tile < t.tiles; ++tile) {
      const uint16_t* b = t.packed + tile * t.pairs * kCols * 2;
      float* c = t.c + m * t.ldc + tile * kCols;
      if (t.m - m >= 2 * kAmxRows)
        block<true>(a, t.lda, b, t.pairs, c, t.ldc);
      else
        block<false>(a, t.lda, b, t.pairs, c, t.ldc);
    }
  }
  // Leaves the tile state empty again, so a context switch saves none of it.
  _tile_release();
}

}  // namespace iron::ops::gemm
