// What the processor offers, probed once: on x86-64 cpuid and the OS's saved register state, on
// aarch64 the kernel's hardware capabilities (getauxval) and SVE vector length.
#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "devices/cpu/kernel.hpp"

namespace iron::cpu {

namespace {
#if defined(__x86_64__)
bool request_tile_state() {
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif
}  // namespace

const Features& Features::host() {
  static const Features features = [] {
    Features f;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
      f.fma = c & (1u << 12);
      f.f16c = c & (1u << 29);
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = b & (1u << 5);
      f.avx512f = b & (1u << 16);
      f.avx512dq = b & (1u << 17);
      f.avx512bw = b & (1u << 30);
      f.avx512vnni = c & (1u << 11);
      f.avx512vl = b & (1u << 31);
      f.amx_bf16 = (d & (1u << 22)) && (d & (1u << 24));  // AMX-BF16 and AMX-TILE
      f.amx_int8 = (d & (1u << 25)) && (d & (1u << 24));  // AMX-INT8 and AMX-TILE
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      f.avxvnni = a & (1u << 4);  // vpdpbusd on 256-bit registers (Alder Lake and later, Zen 5)
      f.avx512bf16 = a & (1u << 5);
    }
    // The vendor's name, in EBX, EDX, ECX of leaf 0.
    bool amd = false;
    if (__get_cpuid(0, &a, &b, &c, &d)) amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
    // The OS must also save the wide registers (XCR0): AVX state and, for AVX-512, opmask/ZMM.
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    if (__get_cpuid_count(1, 0, &a, &b, &c, &d) && (c & (1u << 27)))
      __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    bool avx_state = (xcr0_lo & 0x6) == 0x6, avx512_state = (xcr0_lo & 0xe6) == 0xe6;
    f.avx2 = f.avx2 && avx_state;
    f.fma = f.fma && avx_state;
    f.avxvnni = f.avxvnni && f.avx2;
    f.avx512f = f.avx512f && avx512_state;
    f.avx512bw = f.avx512bw && avx512_state;
    f.avx512vl = f.avx512vl && avx512_state;
    f.avx512dq = f.avx512dq && avx512_state;
    f.avx512vnni = f.avx512vnni && avx512_state;
    f.avx512bf16 = f.avx512bf16 && f.avx512f;
    f.bf16_pairs_fast = f.avx512bf16 && amd;
    // AMX needs the OS to save the tile state (XCR0 bits 17 and 18) and, on Linux, the process to
    // ask for it (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA): a VM may list AMX in cpuid and
    // still refuse, and a tile instruction without that permission kills the process. So AMX is
    // offered only where the request succeeded, which holds for every thread of the process.
    const bool tiles = (f.amx_bf16 || f.amx_int8) && (xcr0_lo & 0x60000) == 0x60000 && request_tile_state();
    f.amx_bf16 = f.amx_bf16 && f.avx512bf16 && tiles;
    // The int8 tiles' epilogue is the AVX-512 int8 loops' (gemm_amx.cpp), so it wants their features.
    f.amx_int8 = f.amx_int8 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && tiles;
#elif defined(__aarch64__)
    const unsigned long hwcap = getauxval(AT_HWCAP);
    f.neon = hwcap & HWCAP_ASIMD;
    f.dotprod = f.neon && (hwcap & HWCAP_ASIMDDP);
    // SVE's vector length is what the kernel set for this process (in bytes, the low bits).
    if (hwcap & HWCAP_SVE) {
      const int vl = prctl(PR_SVE_GET_VL, 0, 0, 0, 0);
      if (vl > 0) f.sve_bits = 8 * (vl & PR_SVE_VL_LEN_MASK);
    }
#endif
    const char* level = std::getenv("IRON_CPU");
    return level ? f.limited_to(level) : f;
  }();
  return features;
}

Features Features::limited_to(std::string_view level) const {
  Features f = *this;
  if (level == "avx512") f.amx_bf16 = f.amx_int8 = false;
  if (level == "portable" || level == "avx2" || level == "avxvnni") {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512bf16 = f.avx512vnni = false;
    f.bf16_pairs_fast = f.amx_bf16 = f.amx_int8 = false;
  }
  // "avx2" is a processor with AVX2 alone (Haswell to Zen 3), "avxvnni" one with AVX-VNNI too.
  if (level == "portable" || level == "avx2") f.avxvnni = false;
  if (level == "portable") f.avx2 = f.fma = f.f16c = false;
  if (level == "portable" || level == "neon" || level == "dotprod") f.sve_bits = 0;
  // "neon" is an ARMv8.0 processor (NEON alone: a Cortex-A72, a Raspberry Pi 4), "dotprod" one
  // with the dot-product extension too (ARMv8.2 and later, without SVE).
  if (level == "portable" || level == "neon") f.dotprod = false;
  if (level == "portable") f.neon = false;
  return f;
}

std::string Features::str() const {
  std::ostringstream o;
  o << (avx2 ? "avx2 " : "") << (fma ? "fma " : "") << (f16c ? "f16c " : "") << (avxvnni ? "avxvnni " : "")
    << (avx512f ? "avx512f " : "") << (avx512bw ? "avx512bw " : "") << (avx512vl ? "avx512vl " : "")
    << (avx512dq ? "avx512dq " : "") << (avx512bf16 ? "avx512bf16 " : "")
    << (avx512vnni ? "avx512vnni " : "") << (amx_bf16 ? "amx-bf16 " : "")
    << (amx_int8 ? "amx-int8 " : "") << (neon ? "neon " : "") << (dotprod ? "dotprod " : "");
  if (sve_bits > 0) o << "sve (" << sve_bits << "-bit) ";
  const std::string s = o.str();
  return s.empty() ? "portable" : s.substr(0, s.size() - 1);
}

}  // namespace iron::cpu
