// What every AMX kernel (*_amx.cpp) shares: the tile configuration. Internal linkage, as in
// simd_avx512.hpp: nothing here may be picked for baseline callers.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace iron::cpu::amx {
namespace {

// The LDTILECFG operand: palette 1, then each tile's bytes per row and rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Configures all eight tile registers as full tiles: 16 rows of 64 bytes (32 bf16 or 16 f32).
// Pair with _tile_release() when done, so a context switch saves no tile state.
[[maybe_unused]] inline void configure_full_tiles() {
  TileConfig config;
  for (int i = 0; i < 8; ++i) {
    config.bytes_per_row[i] = 64;
    config.rows[i] = 16;
  }
  _tile_loadconfig(&config);
}

}  // namespace
}  // namespace iron::cpu::amx
