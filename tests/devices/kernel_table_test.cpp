// The CPU device's kernel table: which kernel each kind of step takes on processors of each kind
// (their features written out here, so every case runs on any machine of the build's
// architecture: the table holds x86's kernels in an x86-64 build, ARM's in an aarch64 one), and
// why the faster ones were passed over.
#include <gtest/gtest.h>

#include <string>

#include "devices/cpu/kernel_table.hpp"
#include "iron/cpu.hpp"
#include "ops/kernel_report.hpp"

namespace iron {
namespace {

[[maybe_unused]] cpu::Features avx2_machine() {
  cpu::Features f;
  f.avx2 = f.fma = f.f16c = true;
  return f;
}
[[maybe_unused]] cpu::Features avx512_machine() {
  cpu::Features f = avx2_machine();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512bf16 = f.avx512vnni = true;
  return f;
}
[[maybe_unused]] cpu::Features amx_machine() {
  cpu::Features f = avx512_machine();
  f.amx_bf16 = f.amx_int8 = true;
  return f;
}

// The target taken for the report's step `step` of `op`, and the reasons it gave, on `f`.
std::string choice(const cpu::Features& f, const std::string& op, const std::string& step) {
  for (const ops::KernelReportLine& line : ops::choose_cpu_kernels(f))
    if (line.step.op == op && line.step.step == step) return line.choice.str();
  ADD_FAILURE() << "no step '" << step << "' of " << op << " in the report";
  return "";
}
// How the chosen kernel computes the step (KernelEntry::describes), empty where it says nothing.
[[maybe_unused]] std::string how(const cpu::Features& f, const std::string& op, const std::string& step) {
  for (const ops::KernelReportLine& line : ops::choose_cpu_kernels(f))
    if (line.step.op == op && line.step.step == step) return line.how;
  ADD_FAILURE() << "no step '" << step << "' of " << op << " in the report";
  return "";
}
// The target alone.
std::string taken(const cpu::Features& f, const std::string& op, const std::string& step) {
  const std::string c = choice(f, op, step);
  return c.substr(0, c.find(' '));
}
// The operators written once with Highway take `target` on `f`: every vector target has them.
void expect_highway_kernels(const cpu::Features& f, const std::string& target) {
  EXPECT_EQ(taken(f, "LayerNorm", "f32 rows"), target);
  EXPECT_EQ(taken(f, "SwiGLU", "f32"), target);
  EXPECT_EQ(taken(f, "GeGLU", "f32"), target);
  EXPECT_EQ(taken(f, "GELU", "f32"), target);
  EXPECT_EQ(taken(f, "RMSNorm", "f32 rows"), target);
  EXPECT_EQ(taken(f, "Copy", "f32 rows into a f16 cache"), target);
  EXPECT_EQ(taken(f, "Copy", "f32 rows into a bf16 cache"), target);
  EXPECT_EQ(taken(f, "Copy", "f32 rows into a q8_0 cache"), target);
}

TEST(KernelTable, APortableMachineTakesThePortableLoopsAndSaysWhatEachFasterOneNeeds) {
  const cpu::Features none;
  for (const ops::KernelReportLine& line : ops::choose_cpu_kernels(none)) {
    ASSERT_NE(line.choice.taken, nullptr) << line.step.op << " " << line.step.step;
    EXPECT_EQ(line.choice.taken->target, cpu::Target::portable) << line.step.op << " " << line.step.step;
  }
#if defined(__x86_64__)
  EXPECT_EQ(choice(none, "GELU", "f32"),
            "portable (avx512 passed over: needs avx512f avx512bw avx512vl avx512dq avx2 fma f16c; avx2 passed over: "
            "needs avx2 fma f16c)");
#elif defined(__aarch64__)
  EXPECT_EQ(choice(none, "GELU", "f32"), "portable (sve passed over: needs sve neon; neon passed over: needs neon)");
#endif
}

TEST(KernelTable, TargetsOfAnotherArchitectureAreNotInTheTable) {
  for (const std::string& op : cpu::kernels().ops())
    for (const cpu::KernelEntry& e : cpu::kernels().entries(op))
      EXPECT_TRUE(cpu::built_here(e.target)) << op << " has a " << cpu::target_name(e.target) << " kernel";
  EXPECT_TRUE(cpu::built_here(cpu::Target::portable));
  EXPECT_NE(cpu::built_here(cpu::Target::avx2), cpu::built_here(cpu::Target::neon));
}

#if defined(__aarch64__)
cpu::Features neon_machine() {
  cpu::Features f;
  f.neon = true;
  return f;
}
cpu::Features sve_machine(int bits) {
  cpu::Features f = neon_machine();
  f.sve_bits = bits;
  return f;
}

TEST(KernelTable, ANeonMachineTakesTheNeonLoopsWhereAnOperatorHasThem) {
  const cpu::Features f = neon_machine();
  EXPECT_EQ(choice(f, "GELU", "f32"), "neon (sve passed over: needs sve)");
  expect_highway_kernels(f, "neon");
  // The matmuls take NEON's f32 loops, the K-quants' too (medium's int8 ones need the
  // dot-product extension, below); a step they refuse, the portable loops with NEON's features
  // (so an epilogue merged into them gives the bits the operator alone gives). Attention takes
  // Highway's NEON tile.
  EXPECT_EQ(choice(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "neon (sve passed over: needs sve)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(f32 FMA)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q6_k weight, f32 rows, medium"), "(f32 FMA)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, K of 1000 (not whole blocks)"),
            "(the portable loops: K of 1000, not whole blocks of 32)");
  EXPECT_EQ(choice(f, "Attention", "f16 cache, highest"), "neon");
  // With the dot-product extension (ARMv8.2), medium's block-quantised matmuls take int8 sdot;
  // highest and float weights stay in f32.
  cpu::Features dot = f;
  dot.dotprod = true;
  EXPECT_EQ(dot.str(), "neon dotprod");
  EXPECT_EQ(how(dot, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(int8 x: sdot)");
  EXPECT_EQ(how(dot, "ProjectionGEMM", "q6_k weight, f32 rows, medium"), "(int8 x: sdot)");
  EXPECT_EQ(how(dot, "ProjectionGEMM", "q4_1 weight, f32 rows, highest"), "(f32 FMA)");
  EXPECT_EQ(how(dot, "ProjectionGEMM", "f16 weight, f32 rows, medium"), "(f32 FMA, W read as bf16)");
  EXPECT_EQ(dot.limited_to("dotprod").str(), "neon dotprod");
  // IRON_CPU=neon is NEON alone (ARMv8.0): medium's matmuls in f32 there.
  EXPECT_EQ(dot.limited_to("neon").str(), "neon");
  EXPECT_EQ(how(dot.limited_to("neon"), "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(f32 FMA)");
  EXPECT_EQ(dot.limited_to("portable").str(), "portable");
}

TEST(KernelTable, AnSveMachineTakesTheSveLoopsAtAnyVectorLength) {
  for (int bits : {128, 256, 512}) {
    const cpu::Features f = sve_machine(bits);
    SCOPED_TRACE(bits);
    EXPECT_EQ(choice(f, "GELU", "f32"), "sve");
    expect_highway_kernels(f, "sve");
    // IRON_CPU=neon leaves SVE out.
    expect_highway_kernels(f.limited_to("neon"), "neon");
    EXPECT_EQ(taken(f.limited_to("portable"), "RMSNorm", "f32 rows"), "portable");
    // Attention's tile has no SVE copy (arrays of vectors): NEON's serves.
    EXPECT_EQ(choice(f, "Attention", "f16 cache, highest"), "neon");
  }
  EXPECT_EQ(sve_machine(256).str(), "neon sve (256-bit)");
  EXPECT_EQ(sve_machine(256).limited_to("neon").str(), "neon");
}
#endif

#if defined(__x86_64__)
TEST(KernelTable, AnAvx2MachineTakesTheAvx2LoopsWhereAnOperatorHasThem) {
  const cpu::Features f = avx2_machine();
  EXPECT_EQ(taken(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "avx2");
  EXPECT_EQ(taken(f, "GEMV", "q8_0 weight, one f32 row"), "avx2");
  EXPECT_EQ(taken(f, "Attention", "f16 cache, highest"), "avx2");
  // Medium's block-quantised matmuls take int8 dot products (vpmaddubsw); float weights are read
  // as bf16 and multiplied in f32; highest stays in f32.
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(int8 x: vpmaddubsw)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q6_k weight, f32 rows, medium"), "(int8 x: vpmaddubsw)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "f16 weight, f32 rows, medium"), "(f32 FMA, W read as bf16)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "f16 weight, f32 rows, highest"), "(f32 FMA)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, highest"), "(f32 FMA)");
  // Written once with Highway, so AVX2 has them as AVX-512 does.
  expect_highway_kernels(f, "avx2");
  // The per-head rows have an AVX-512 loop only.
  EXPECT_NE(choice(f, "Attention", "f32 cache, the per-head path")
                .find("portable (amx passed over: needs amx-bf16 or amx-int8"),
            std::string::npos);
  EXPECT_NE(choice(f, "Attention", "f32 cache, the per-head path")
                .find("avx2 passed over: the per-head rows have a vector loop for AVX-512 alone"),
            std::string::npos);
  EXPECT_NE(choice(f, "Gather", "q8_0 embedding rows into f32").find("avx2 passed over: only f32 into f16, bf16 or q8_0"),
            std::string::npos);
}

TEST(KernelTable, AnAvxVnniMachineTakesVpdpbusdOnTheAvx2Loops) {
  cpu::Features f = avx2_machine();
  f.avxvnni = true;
  EXPECT_EQ(f.str(), "avx2 fma f16c avxvnni");
  EXPECT_EQ(taken(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "avx2");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(int8 x: vpdpbusd, AVX-VNNI)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q6_k weight, f32 rows, medium"), "(int8 x: vpdpbusd, AVX-VNNI)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, highest"), "(f32 FMA)");
  // IRON_CPU=avx2 is a processor with AVX2 alone; IRON_CPU=avxvnni keeps it.
  EXPECT_EQ(how(f.limited_to("avx2"), "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(int8 x: vpmaddubsw)");
  EXPECT_EQ(f.limited_to("avxvnni").str(), "avx2 fma f16c avxvnni");
  cpu::Features big = avx512_machine();
  big.avxvnni = true;
  EXPECT_EQ(big.limited_to("avxvnni").str(), "avx2 fma f16c avxvnni");
  EXPECT_EQ(big.limited_to("avx2").str(), "avx2 fma f16c");
}

TEST(KernelTable, AnAvx512MachineWithoutAmxTakesAvx512) {
  const cpu::Features f = avx512_machine();
  for (const char* step : {"q4_1 weight, f32 rows, medium", "f32 weight, f32 rows, highest"})
    EXPECT_EQ(choice(f, "ProjectionGEMM", step),
              "avx512 (amx passed over: needs amx-bf16 or amx-int8 (with the OS's leave to use tiles),)");
  expect_highway_kernels(f, "avx512");
  EXPECT_EQ(how(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "(int8 x: vpdpbusd)");
  // An Intel core's vdpbf16ps multiplies no more pairs than its FMAs: medium reads W as bf16 and
  // multiplies in f32 there.
  EXPECT_EQ(how(f, "ProjectionGEMM", "f32 weight, f32 rows, medium"),
            "(f32 FMA, W read as bf16: vdpbf16ps multiplies no more pairs here)");
  EXPECT_EQ(how(f, "ProjectionGEMM", "f32 weight, f32 rows, highest"), "(f32 FMA)");
  cpu::Features amd = f;
  amd.bf16_pairs_fast = true;
  EXPECT_EQ(how(amd, "ProjectionGEMM", "f32 weight, f32 rows, medium"), "(bf16 x: vdpbf16ps)");
}

TEST(KernelTable, AmxTakesOnlyWhatMediumMayRoundInTiles) {
  const cpu::Features f = amx_machine();
  EXPECT_EQ(choice(f, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "amx");
  EXPECT_EQ(choice(f, "ProjectionGEMM", "q4_1 weight, f32 rows, highest"),
            "avx512 (amx passed over: tiles round to bf16 or int8: medium only)");
  EXPECT_EQ(choice(f, "GEMV", "q4_1 weight, one f32 row"),
            "avx512 (amx passed over: one row (GEMV) rounds once from f32 sums)");
  EXPECT_EQ(choice(f, "Attention", "an encoder's segments, f32, medium"), "amx");
  EXPECT_EQ(choice(f, "Attention", "q8_0 cache, medium"),
            "avx512 (amx passed over: tiles serve an encoder's segments only)");
  // Without the int8 tiles a ProjectionGEMM at medium still takes bf16 ones.
  cpu::Features bf16_tiles = f;
  bf16_tiles.amx_int8 = false;
  EXPECT_EQ(choice(bf16_tiles, "ProjectionGEMM", "q4_1 weight, f32 rows, medium"), "amx");
}

TEST(KernelTable, AStepNoVectorLoopTakesGoesToThePortableOneWithTheReason) {
  EXPECT_EQ(choice(amx_machine(), "ProjectionGEMM", "q4_1 weight, K of 1000 (not whole blocks)"),
            "portable (amx passed over: K of 1000, not whole blocks of 32; avx512 passed over: K of 1000, not whole "
            "blocks of 32; avx2 passed over: K of 1000, not whole blocks of 32)");
}

#endif  // __x86_64__

TEST(KernelTable, EveryOperatorOfTheCatalogHasAPortableKernel) {
  for (const auto& [name, entry] : catalog()) {
    const std::vector<cpu::KernelEntry>& entries = cpu::kernels().entries(name);
    ASSERT_FALSE(entries.empty()) << name;
    EXPECT_EQ(entries.back().target, cpu::Target::portable) << name << ": the last resort on every processor";
    EXPECT_EQ(entries.back().refuses, nullptr) << name << ": the portable kernel takes every step";
  }
}

TEST(KernelTable, TwoKernelsForOneTargetAreRefused) {
  cpu::KernelTable t;
  t.add({"X", cpu::Target::avx2, nullptr, nullptr});
  EXPECT_THROW(t.add({"X", cpu::Target::avx2, nullptr, nullptr}), Error);
  EXPECT_EQ(t.entries("Y").size(), 0u);
}

TEST(KernelTable, TheReportNamesThisMachinesFeaturesAndEveryStep) {
  const std::string report = cpu_device::describe_kernels("cpu");
  EXPECT_NE(report.find("CPU features: "), std::string::npos) << report;
  EXPECT_NE(report.find("ProjectionGEMM q4_1 weight, f32 rows, medium"), std::string::npos) << report;
  EXPECT_NE(cpu_device::describe_kernels("vulkan").find("Vulkan"), std::string::npos);
  EXPECT_THROW(cpu_device::describe_kernels("npu"), Error);
}

}  // namespace
}  // namespace iron
