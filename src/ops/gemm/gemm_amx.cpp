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
// (16-31). Built with -mamx-tile -mamx-bf16 -mamx-int8 (CMakeLists: files named *_amx.cpp);
// called only where cpu::Features says the OS lets this process use the tiles.
//
// The int8 path (Precision::medium, block-quantised W) on AMX-INT8: one TDPBSUD multiplies 16
// rows of x's int8 blocks (signed; or fewer, as many as a batched decode step has: q8_0 only,
// gemm_fast.cpp) by a block of W's rearranged quants (unsigned: the layout's 8
// 64-byte loads of a block are a B tile's rows as they are, after unpacking nibbles) into the
// 16 x 16 exact int32 sums that 64 vpdpbusd make, and the AVX-512 int8 loop's own epilogue
// (int8_blocks.hpp) finishes each row's block from them. So a row's outputs are the bits the
// VNNI loop gives it (tests/ops/gemm_int8_test.cpp checks that), whatever the batch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "devices/cpu/amx.hpp"
#include "ops/gemm/int8_blocks.hpp"
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

// ---- int8 ---------------------------------------------------------------------------------
// Tiles are not renamed: a block's sums tile cannot be zeroed for the next block until its store
// has read it, so the blocks alternate between two sets of sums tiles, and block b + kAhead's
// products are issued before block b's epilogue reads its sums (the tile unit works while the
// vector units finish). With one set and no lead, each block waited on the last and the whole
// was about as fast as the VNNI loop (docs/design.md has the figures of this one).
//   q6_k (each half of 16 columns has its own scale, so its own sums): one tile of 16 rows of x
//     a pass; sums tiles 2s (half 0) and 2s + 1 (half 1) of set s; x's halves in tiles 4 and 5;
//     W's halves (4 B rows each) in 6 and 7.
//   the others: two tiles of 16 rows of x a pass; sums tiles 2s + t (x tile t) of set s; x in
//     tiles 4 and 5 (x tile 0, 1); W's block (8 B rows) in tile 6 + s.
// Blocks whose products are issued ahead of the epilogue, and the ring of their sums (a power of
// two above it); blocks whose quants are unpacked ahead of their products, and the ring of those.
// A tile load of bytes the vector units have just stored waits for the stores to reach the
// cache: unpacking a block right before its products took 250 TSC ticks a block where the tiles
// alone take 50 (a one-off measurement of tile throughput on this Xeon).
constexpr int64_t kAhead = 4, kRing = 8, kUnpackAhead = 12, kUnpackRing = 16;

// The first pass over a group prefetches W this far ahead of the block it reads (the passes
// after it find the group in L1). A batched step's few rows spend long enough on each block that
// the hardware prefetcher alone fell behind: SmolLM2's q8_0 classifier (576->49152, 8 rows, one
// thread, W cold) took 4.18 and 4.09 ms a call without, 3.72 and 3.54 with it (bench_gemv's
// BM_GEMMCold, medians; 2 and 8 KiB ahead no better in a throwaway loop). The VNNI loop, which
// prefetches too, now takes those 8 rows (gemm_fast.cpp); the tiles take 9 or more.
constexpr int64_t kTilePrefetchAhead = 4096;
template <DType T>
constexpr int64_t int8_x_tiles() {
  return T == DType::q6_k ? 1 : 2;
}

// Rows [i0, i0 + rows) of x against one group of W: 16 output columns of each, at y (ldy
// apart). `rows` is 16 times a count of tiles (at most int8_x_tiles), or below 16: one tile of
// that many rows, which the configuration (int8_all) gave x's and the sums' tiles. `prefetch`:
// this is the first pass over the group (kTilePrefetchAhead).
template <DType T>
void int8_tiles(const GemmInt8Args& g, int64_t i0, int64_t rows, const char* group, float* y, bool prefetch) {
  constexpr int64_t kMaxTiles = int8_x_tiles<T>();
  const int64_t blocks = g.k / 32;
  // Ring slots: block b's quants as 8 B rows (all but q8_0) at b % kUnpackRing, and its sums
  // at b % kRing by tile (x tile, or q6_k's half), row of x, row of W.
  alignas(64) uint8_t unpacked[kUnpackRing][8 * 64];
  // A slot is its two tiles of 16 x 16 sums one after the other (row r of both: r * 16 on).
  alignas(64) int32_t sums[kRing][2 * 16 * 16];
  alignas(64) float acc[kMaxTiles * kAmxRows][16];
  for (int64_t r = 0; r < rows; ++r) _mm512_store_ps(acc[r], _mm512_setzero_ps());
  const int8_t* x = g.q + i0 * g.k;
  // Block b's quants (all but q8_0, whose layout is a B tile already) into its ring slot.
  auto unpack = [&](int64_t b) {
    if constexpr (T != DType::q8_0) {
      const char* quants = group + int8_quants_at(T, b);
      for (int c = 0; c < 4; ++c) {
        __m512i lo, hi;
        int8_unpack<T>(quants, c, &lo, &hi);
        _mm512_store_si512(unpacked[b % kUnpackRing] + 128 * c, lo);
        _mm512_store_si512(unpacked[b % kUnpackRing] + 128 * c + 64, hi);
      }
    }
  };
  // Block b's products in set S's tiles (S = b % 2), into its ring slot.
  auto products = [&](auto set, int64_t b) {
    constexpr int S = decltype(set)::value;
    const int64_t slot = b % kRing;
    const void* w = T == DType::q8_0 ? static_cast<const void*>(group + int8_quants_at(T, b)) : unpacked[b % kUnpackRing];
    const int8_t* xb = x + 32 * b;
    // GCC's tile intrinsics paste their register numbers into the instruction's text, so each
    // set's numbers are spelled out: sums tiles c0 and c1, W's tile wt.
#define IRON_INT8_PRODUCTS(c0, c1, wt)                        \
  if constexpr (T == DType::q6_k) {                           \
    _tile_loadd(6, w, 64);                                    \
    _tile_loadd(7, static_cast<const char*>(w) + 256, 64);    \
    _tile_zero(c0);                                           \
    _tile_zero(c1);                                           \
    _tile_loadd(4, xb, g.k);                                  \
    _tile_loadd(5, xb + 16, g.k);                             \
    _tile_dpbsud(c0, 4, 6);                                   \
    _tile_dpbsud(c1, 5, 7);                                   \
    _tile_stored(c0, sums[slot], 64);                         \
    _tile_stored(c1, sums[slot] + 16 * 16, 64);                         \
  } else {                                                    \
    _tile_loadd(wt, w, 64);                                   \
    _tile_zero(c0);                                           \
    _tile_loadd(4, xb, g.k);                                  \
    _tile_dpbsud(c0, 4, wt);                                  \
    _tile_stored(c0, sums[slot], 64);                         \
    if (rows > kAmxRows) {                                    \
      _tile_zero(c1);                                         \
      _tile_loadd(5, xb + kAmxRows * g.k, g.k);               \
      _tile_dpbsud(c1, 5, wt);                                \
      _tile_stored(c1, sums[slot] + 16 * 16, 64);                       \
    }                                                         \
  }
    if constexpr (S == 0) {
      IRON_INT8_PRODUCTS(0, 1, 6)
    } else {
      IRON_INT8_PRODUCTS(2, 3, 7)
    }
#undef IRON_INT8_PRODUCTS
  };
  Int8Scales<T> sc;
  // Block b's epilogue from its ring slot, for every row.
  auto finish = [&](int64_t b) {
    sc.load(group, b);
    const auto& in = sums[b % kRing];
    for (int64_t r = 0; r < rows; ++r) {
      // Row r's sums: row r of the slot's two tiles (q6_k: r < 16, the second tile its second half).
      const int64_t i = i0 + r;
      const __m512i dot[2] = {_mm512_load_si512(in + 16 * r),
                              T == DType::q6_k ? _mm512_load_si512(in + 16 * 16 + 16 * r) : _mm512_setzero_si512()};
      _mm512_store_ps(acc[r], int8_finish<T>(sc, dot, g.scale[i * blocks + b], g.xsum[i * blocks + b],
                                             g.xsum16 + i * 2 * blocks + 2 * b, _mm512_load_ps(acc[r])));
    }
  };
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  auto start = [&](int64_t b) {
    if (b % 2 == 0)
      products(Zero{}, b);
    else
      products(One{}, b);
  };
  for (int64_t b = 0; b < std::min(kUnpackAhead, blocks); ++b) unpack(b);
  for (int64_t b = 0; b < std::min(kAhead, blocks); ++b) start(b);
  for (int64_t b = 0; b < blocks; ++b) {
    if (prefetch) int8_prefetch<T>(group + int8_quants_at(T, b), kTilePrefetchAhead);
    if (b + kUnpackAhead < blocks) unpack(b + kUnpackAhead);
    if (b + kAhead < blocks) start(b + kAhead);
    finish(b);
  }
  for (int64_t r = 0; r < rows; ++r) _mm512_storeu_ps(y + r * g.ldy, _mm512_load_ps(acc[r]));
}

template <DType T>
void int8_all(const GemmInt8Args& g) {
  // Tiles of x and of the sums have 16 rows, or all of x's rows where it has fewer (a batched
  // decode step): a TDPBSUD, a tile load and a tile store of fewer rows take fewer cycles,
  // where rows of zeros padding x to 16 would cost what 16 rows do.
  const auto x_rows = uint8_t(std::min<int64_t>(g.m, kAmxRows));
  cpu::amx::TileConfig config;
  for (int t = 0; t < 4; ++t) config.bytes_per_row[t] = 64, config.rows[t] = x_rows;
  // x: a block's 32 columns (q6_k: a half's 16); W: the block's 8 rows of 64 bytes (q6_k: a
  // half's 4).
  const int x_bytes = T == DType::q6_k ? 16 : 32, w_rows = T == DType::q6_k ? 4 : 8;
  for (int t = 4; t < 6; ++t) config.bytes_per_row[t] = uint16_t(x_bytes), config.rows[t] = x_rows;
  for (int t = 6; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = uint8_t(w_rows);
  _tile_loadconfig(&config);
  const int64_t group_bytes = PackedInt8::group_bytes(g.k, T), pass = int8_x_tiles<T>() * kAmxRows;
  // Group by group, as the VNNI loop: a group of W stays in L1 while every row of x meets it.
  for (int64_t j = 0; j < g.groups; ++j)
    for (int64_t i = 0; i < g.m; i += pass)
      int8_tiles<T>(g, i, std::min(pass, g.m - i), g.w + j * group_bytes, g.y + i * g.ldy + j * kInt8Rows, i == 0);
  _tile_release();
}

}  // namespace

void gemm_int8_amx(const GemmInt8Args& g) {
  with_int8_kind(g.dtype, [&](auto kind) { int8_all<decltype(kind)::value>(g); });
}

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
