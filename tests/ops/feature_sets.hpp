// The CPU dispatch paths a kernel test runs on this host: the portable loops always; AVX2 (without
// AVX-VNNI, then with it) and AVX-512 where the host has them (each limited to its own target);
// and the whole host where it has more (AMX); on ARM, NEON alone, with the dot-product
// extension, and SVE where the host has them.
#pragma once

#include <vector>

#include "devices/cpu/kernel.hpp"

namespace iron::test {

inline std::vector<cpu::Features> feature_sets() {
  const cpu::Features& host = cpu::Features::host();
  std::vector<cpu::Features> sets{host.limited_to("portable")};
  if (host.avx2 && host.fma && host.f16c) sets.push_back(host.limited_to("avx2"));
  if (host.avxvnni) sets.push_back(host.limited_to("avxvnni"));
  if (host.avx512f && host.avx512bw && host.avx512vl && host.avx512dq && host.f16c)
    sets.push_back(host.limited_to("avx512"));
  if (host.amx_bf16) sets.push_back(host);
  if (host.neon) sets.push_back(host.limited_to("neon"));
  if (host.dotprod) sets.push_back(host.limited_to("dotprod"));
  if (host.neon && host.sve_bits > 0) sets.push_back(host);
  return sets;
}

// The matmul's: feature_sets(), and where the host has AVX512_BF16 but its vdpbf16ps multiplies
// no more than its FMAs (Intel's cores), the same with bf16 products taken anyway, so the bf16
// loops that AMD's cores run are tested wherever they can run.
inline std::vector<cpu::Features> matmul_feature_sets() {
  std::vector<cpu::Features> sets = feature_sets();
  const cpu::Features& host = cpu::Features::host();
  if (host.avx512bf16 && !host.bf16_pairs_fast) {
    cpu::Features bf16 = host.limited_to("avx512");
    bf16.bf16_pairs_fast = true;
    sets.push_back(bf16);
  }
  return sets;
}

}  // namespace iron::test
