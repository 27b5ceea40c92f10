// How many multiply-adds a second one core issues with each product instruction the matmul
// kernels are built on, alone on registers (12 independent chains, or for vpmaddubsw and
// vpmaddwd 6 independent products a step, no loads): the ceilings the
// kernels' figures are shares of (docs/design.md), and what decides which products `medium`
// takes on a processor (`Features::bf16_pairs_fast`: whether vdpbf16ps outruns f32 FMAs).
// Instruction tables give these too; they differ between cores and hypervisors, so measure.
//   ./build/bench/bench_product_rates
// Counters: "Gproducts/s", multiply-adds a second of the thread's CPU time, so a thread the
// machine takes off its core does not lower it (an FMA lane is one; vpdpbusd's 4 byte pairs a
// lane are four; vdpbf16ps's 2 bf16 pairs a lane two). A path the host lacks is skipped, saying
// so. One thread: run it on a quiet core, alternating with whatever it is compared to.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "devices/cpu/kernel.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define IRON_VECTOR_REGISTER "+v"
#elif defined(__aarch64__)
#include <arm_neon.h>
#define IRON_VECTOR_REGISTER "+w"
#endif

namespace {

using iron::cpu::Features;

constexpr int kChains = 12;        // independent accumulators: past any of these latencies x ports
constexpr int64_t kSteps = 1 << 16;  // steps of every chain per timed iteration

// Times `body(steps)` (which returns products done), one iteration of kSteps at a time.
template <class Body>
void time_products(benchmark::State& state, bool runs, const char* needs, Body body) {
  if (!runs) {
    state.SkipWithError((std::string("this processor (or IRON_CPU) lacks ") + needs).c_str());
    return;
  }
  double products = 0;
  for (auto _ : state) products += body(kSteps);
  state.counters["Gproducts/s"] = benchmark::Counter(products / 1e9, benchmark::Counter::kIsRate);
}

#if defined(IRON_VECTOR_REGISTER)
// One body of kChains chains, for a function built for its instructions: V the register type,
// INIT(c) chain c's start, W and X the operands (an empty asm says they may change each step, so
// nothing folds), STEP(acc, w, x) one product instruction, ADD to sum the chains (so none is
// dead), LANE_PRODUCTS the multiply-adds one STEP does (every lane's). A macro rather than a
// template taking lambdas: GCC does not build a lambda for its enclosing function's target
// instructions.
#define IRON_PRODUCT_CHAINS(V, INIT, W, X, STEP, ADD, LANE_PRODUCTS)           \
  V acc[kChains];                                                              \
  V w = W, x = X;                                                              \
  for (int c = 0; c < kChains; ++c) acc[c] = INIT(c);                          \
  for (int64_t i = 0; i < steps; ++i) {                                        \
    for (int c = 0; c < kChains; ++c) acc[c] = STEP(acc[c], w, x);             \
    __asm__ volatile("" : IRON_VECTOR_REGISTER(w), IRON_VECTOR_REGISTER(x));   \
  }                                                                            \
  V sum = acc[0];                                                              \
  for (int c = 1; c < kChains; ++c) sum = ADD(sum, acc[c]);                    \
  benchmark::DoNotOptimize(sum);                                               \
  return double(steps) * kChains * (LANE_PRODUCTS)

const Features& host() { return Features::host(); }
#endif

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] double fma_ymm(int64_t steps) {
  IRON_PRODUCT_CHAINS(__m256, _mm256_set1_ps, _mm256_set1_ps(1.0001f),
                      _mm256_set1_ps(0.999f), _mm256_fmadd_ps, _mm256_add_ps, 8);
}

// Six independent products a step, 3 registers of W by 2 of x, each summed by ADD into its own
// register, as a pass of rows meets a group: V the register type, W(i) and X(i) the operands,
// ACC(c) register c's start, MUL one product instruction, LANE_PRODUCTS the multiply-adds it does.
// Not IRON_PRODUCT_CHAINS: its chains all take the same w and x, and where the product does not
// take its accumulator (vpmaddubsw, vpmaddwd) the compiler made it once a step for all 12, so the
// counter measured the adds and stack traffic (83 G a second on a Zen 3 core for vpmaddubsw,
// which docs/design.md once took for its rate).
#define IRON_PAIRED_PRODUCTS(V, W, X, ACC, MUL, ADD, LANE_PRODUCTS)                            \
  V w0 = W(3), w1 = W(5), w2 = W(7), x0 = X(1), x1 = X(2);                                    \
  V acc[6];                                                                                     \
  for (int c = 0; c < 6; ++c) acc[c] = ACC(c);                                                 \
  for (int64_t i = 0; i < steps; ++i) {                                                         \
    acc[0] = ADD(acc[0], MUL(w0, x0));                                                          \
    acc[1] = ADD(acc[1], MUL(w0, x1));                                                          \
    acc[2] = ADD(acc[2], MUL(w1, x0));                                                          \
    acc[3] = ADD(acc[3], MUL(w1, x1));                                                          \
    acc[4] = ADD(acc[4], MUL(w2, x0));                                                          \
    acc[5] = ADD(acc[5], MUL(w2, x1));                                                          \
    /* New operands each step, as far as the compiler knows: nothing is hoisted out of the loop. */ \
    __asm__ volatile("" : "+x"(w0), "+x"(w1), "+x"(w2), "+x"(x0), "+x"(x1));                   \
  }                                                                                             \
  V sum = acc[0];                                                                               \
  for (int c = 1; c < 6; ++c) sum = ADD(sum, acc[c]);                                          \
  benchmark::DoNotOptimize(sum);                                                                \
  return double(steps) * 6 * (LANE_PRODUCTS)

// AVX2's int8 products as the int8 loop takes them: vpmaddubsw (32 byte pairs into 16 int16 pair
// sums), summed in int16 by vpaddw (the loop widens with vpmaddwd once per several).
[[gnu::target("avx2")]] inline __m256i bytes(int v) { return _mm256_set1_epi8(char(v)); }
[[gnu::target("avx2")]] inline __m256i words(int v) { return _mm256_set1_epi16(int16_t(v)); }
[[gnu::target("avx2")]] inline __m256i dwords(int v) { return _mm256_set1_epi32(v); }
[[gnu::target("avx2")]] double maddubs_ymm(int64_t steps) {
  IRON_PAIRED_PRODUCTS(__m256i, bytes, bytes, words, _mm256_maddubs_epi16, _mm256_add_epi16, 32);
}

// AVX2's int16 products, as a loop over 12-bit blocks of W and x would take them (not built:
// docs/benchmarks.md "What one core multiplies"): vpmaddwd (16 int16 pairs into 8 int32 pair
// sums), summed by vpaddd.
[[gnu::target("avx2")]] double maddwd_ymm(int64_t steps) {
  IRON_PAIRED_PRODUCTS(__m256i, words, words, dwords, _mm256_madd_epi16, _mm256_add_epi32, 16);
}

[[gnu::target("avx2,avxvnni")]] double dpbusd_ymm(int64_t steps) {
  IRON_PRODUCT_CHAINS(__m256i, _mm256_set1_epi32, _mm256_set1_epi8(3), _mm256_set1_epi8(1),
                      _mm256_dpbusd_avx_epi32, _mm256_add_epi32, 32);
}

[[gnu::target("avx512f")]] double fma_zmm(int64_t steps) {
  IRON_PRODUCT_CHAINS(__m512, _mm512_set1_ps, _mm512_set1_ps(1.0001f),
                      _mm512_set1_ps(0.999f), _mm512_fmadd_ps, _mm512_add_ps, 16);
}

[[gnu::target("avx512f,avx512bw,avx512vnni")]] double dpbusd_zmm(int64_t steps) {
  IRON_PRODUCT_CHAINS(__m512i, _mm512_set1_epi32, _mm512_set1_epi8(3), _mm512_set1_epi8(1), _mm512_dpbusd_epi32,
                      _mm512_add_epi32, 64);
}

// vdpbf16ps: 2 bf16 pairs a lane into f32 (each operand here 1.0 in both halves).
[[gnu::target("avx512f,avx512bf16")]] inline __m512 dpbf16(__m512 acc, __m512 w, __m512 x) {
  return _mm512_dpbf16_ps(acc, __m512bh(w), __m512bh(x));
}
[[gnu::target("avx512f,avx512bf16")]] double dpbf16_zmm(int64_t steps) {
  IRON_PRODUCT_CHAINS(__m512, _mm512_set1_ps,
                      _mm512_castsi512_ps(_mm512_set1_epi32(0x3f803f80)),
                      _mm512_castsi512_ps(_mm512_set1_epi32(0x3f803f80)), dpbf16, _mm512_add_ps, 32);
}


void BM_FmaF32Avx2(benchmark::State& s) { time_products(s, host().avx2 && host().fma, "AVX2 with FMA", fma_ymm); }
void BM_Int8Avx2Maddubs(benchmark::State& s) { time_products(s, host().avx2, "AVX2", maddubs_ymm); }
void BM_Int16Avx2Maddwd(benchmark::State& s) { time_products(s, host().avx2, "AVX2", maddwd_ymm); }
void BM_Int8AvxVnni(benchmark::State& s) { time_products(s, host().avxvnni, "AVX-VNNI", dpbusd_ymm); }
void BM_FmaF32Avx512(benchmark::State& s) { time_products(s, host().avx512f, "AVX-512", fma_zmm); }
void BM_Int8Avx512Vnni(benchmark::State& s) {
  time_products(s, host().avx512vnni && host().avx512bw, "AVX512_VNNI", dpbusd_zmm);
}
void BM_Bf16Avx512(benchmark::State& s) { time_products(s, host().avx512bf16, "AVX512_BF16", dpbf16_zmm); }
BENCHMARK(BM_FmaF32Avx2);
BENCHMARK(BM_Int8Avx2Maddubs);
BENCHMARK(BM_Int16Avx2Maddwd);
BENCHMARK(BM_Int8AvxVnni);
BENCHMARK(BM_FmaF32Avx512);
BENCHMARK(BM_Int8Avx512Vnni);
BENCHMARK(BM_Bf16Avx512);
#endif

#if defined(__aarch64__)
double fma_neon(int64_t steps) {
  IRON_PRODUCT_CHAINS(float32x4_t, vdupq_n_f32, vdupq_n_f32(1.0001f), vdupq_n_f32(0.999f), vfmaq_f32, vaddq_f32, 4);
}

// sdot: 4 int8 pairs a lane into int32, as the int8 loop's dotprod copy takes them (the
// operands held as int32x4_t, the chains' type, and read as bytes).
[[gnu::target("arch=armv8.2-a+dotprod")]] inline int32x4_t sdot(int32x4_t acc, int32x4_t w, int32x4_t x) {
  return vdotq_s32(acc, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(x));
}
[[gnu::target("arch=armv8.2-a+dotprod")]] double sdot_neon(int64_t steps) {
  IRON_PRODUCT_CHAINS(int32x4_t, vdupq_n_s32, vdupq_n_s32(0x03030303), vdupq_n_s32(0x01010101), sdot, vaddq_s32,
                      16);
}


void BM_FmaF32Neon(benchmark::State& s) { time_products(s, host().neon, "NEON", fma_neon); }
void BM_Int8NeonDotprod(benchmark::State& s) { time_products(s, host().dotprod, "the dot product extension (sdot)", sdot_neon); }
BENCHMARK(BM_FmaF32Neon);
BENCHMARK(BM_Int8NeonDotprod);
#endif

}  // namespace

BENCHMARK_MAIN();
