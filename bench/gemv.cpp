// Matmul kernels on SmolLM2-135M's and Gemma 3 270M's shapes: GEMV (one row, decode) and GEMM
// (64 and 512 rows, prefill), the portable loops beside the kernel the host dispatches to, 1 and 2 threads.
// GEMV also runs as one row of a ProjectionGEMM at medium (the int8 path with AVX512_VNNI).
// GEMV reads its weight cold (rotating over copies larger than the last-level cache, as a decode
// step does) and hot (one copy, cache-resident); GB/s counts weight bytes read. `iron bench`'s
// streaming read (cpu_device::measure_read_bandwidth) gives the bound a cold GEMV can reach.
//   ./build/bench/bench_gemv [--benchmark_filter=GEMV]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/cpu.hpp"
#include "iron/operator.hpp"

using namespace iron;

namespace {

struct Shape2 {
  const char* name;
  int64_t k, n;
  DType w;
};
// SmolLM2-135M: attention q/o, k/v, MLP gate/up, MLP down (Q4_1), the tied classifier (Q8_0).
// Then Gemma 3 270M's MLP shapes in the kinds of GGUF's Q4_K_M / Q5_K_M / Q6_K files, each
// beside q4_1 on the same shape: gate/up (640 wide rows, so 32-blocks: q5_0, q5_1) and down
// (2048 wide, a multiple of 256: q4_k, q5_k, q6_k).
const Shape2 kShapes[] = {{"576->576 q4_1", 576, 576, DType::q4_1},
                          {"576->192 q4_1", 576, 192, DType::q4_1},
                          {"576->1536 q4_1", 576, 1536, DType::q4_1},
                          {"1536->576 q4_1", 1536, 576, DType::q4_1},
                          {"576->49152 q8_0", 576, 49152, DType::q8_0},
                          {"640->2048 q4_1", 640, 2048, DType::q4_1},
                          {"640->2048 q5_0", 640, 2048, DType::q5_0},
                          {"640->2048 q5_1", 640, 2048, DType::q5_1},
                          {"2048->640 q4_1", 2048, 640, DType::q4_1},
                          {"2048->640 q4_k", 2048, 640, DType::q4_k},
                          {"2048->640 q5_k", 2048, 640, DType::q5_k},
                          {"2048->640 q6_k", 2048, 640, DType::q6_k},
                          // SmolLM2 requantised to Q6_K: 576-wide rows fall back to q8_0, the
                          // down projection (1536-wide) is q6_k.
                          {"576->1536 q8_0", 576, 1536, DType::q8_0},
                          {"1536->576 q6_k", 1536, 576, DType::q6_k},
                          // The encoders' f32 weights (all-MiniLM-L6-v2's MLP, EmbeddingGemma's
                          // gate/up and down), each beside q8_0 on the same shape: what medium's
                          // int8 products cost against its bf16 or f32 ones.
                          {"384->1536 f32", 384, 1536, DType::f32},
                          {"384->1536 q8_0", 384, 1536, DType::q8_0},
                          {"1536->384 f32", 1536, 384, DType::f32},
                          {"1536->384 q8_0", 1536, 384, DType::q8_0},
                          {"768->1152 f32", 768, 1152, DType::f32},
                          {"768->1152 q8_0", 768, 1152, DType::q8_0},
                          {"1152->768 f32", 1152, 768, DType::f32},
                          {"1152->768 q8_0", 1152, 768, DType::q8_0},
                          // Qwen2.5-Coder-1.5B's Q4_K_M: attention q/o, MLP gate/up, MLP down
                          // (q4_k in most blocks, q6_k in some): a prefill's matmuls over a
                          // weight larger than L1 and a 512-row x larger than L2.
                          {"1536->1536 q4_k", 1536, 1536, DType::q4_k},
                          {"1536->8960 q4_k", 1536, 8960, DType::q4_k},
                          {"8960->1536 q4_k", 8960, 1536, DType::q4_k},
                          {"8960->1536 q6_k", 8960, 1536, DType::q6_k}};
constexpr int64_t kSmolShapes = 5, kEncoderShapes = 14, kQwenShapes = 22,
                  kAllShapes = int64_t(sizeof(kShapes) / sizeof(kShapes[0]));

// Indices [from, to) of kShapes, for ArgsProduct.
std::vector<int64_t> shapes(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

int64_t weight_bytes(const Shape2& s) { return s.n * s.k / info(s.w).block * info(s.w).bytes; }

std::vector<char> random_weight(const Shape2& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> bytes(size_t(weight_bytes(s)));
  if (s.w == DType::f32) {  // values of a trained layer's size, not random bit patterns
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (size_t i = 0; i < bytes.size(); i += 4) {
      const float v = u(rng);
      std::memcpy(bytes.data() + i, &v, 4);
    }
    return bytes;
  }
  for (auto& b : bytes) b = char(rng() & 0xff);
  // Each block's f16 fields finite: the scale (q6_k's at its end) and the minimum.
  const int block = info(s.w).bytes;
  const bool minimum = s.w == DType::q4_1 || s.w == DType::q5_1 || s.w == DType::q4_k || s.w == DType::q5_k;
  const size_t scale_at = s.w == DType::q6_k ? 208 : 0;
  for (size_t b = 0; b < bytes.size(); b += size_t(block)) {
    uint16_t h = f32_to_f16(0.01f);
    std::memcpy(bytes.data() + b + scale_at, &h, 2);
    if (minimum) std::memcpy(bytes.data() + b + 2, &h, 2);
  }
  return bytes;
}

const int64_t kWords[1] = {0};  // the kernels here read no per-call word

const cpu::Features& features(bool fast) {
  static const cpu::Features portable = cpu::Features::host().limited_to("portable");
  return fast ? cpu::Features::host() : portable;
}

// A matmul of `rows` rows on `copies` copies of a weight of shape `s`.
struct Setup {
  std::shared_ptr<Operator> op;
  std::vector<std::vector<char>> weights;
  std::vector<float> a, y;
  std::vector<std::unique_ptr<cpu::Kernel>> kernels;

  // `int8`: one row of a ProjectionGEMM at medium (int8 activations where the host has
  // AVX512_VNNI) instead of the GEMV op.
  Setup(const Shape2& s, int64_t rows, int copies, bool fast,
        Precision precision = Precision::highest, bool int8 = false) {
    cpu::ThreadPool::shared(2);
    Fields p{{"K", s.k}, {"N", s.n}};
    if (int8) precision = Precision::medium;
    if (rows > 1 || int8)
      p.set("M", rows), p.set("b_col_maj", true), p.set("precision", std::string(name(precision)));
    op = catalog_entry(int8 ? "ProjectionGEMM" : rows > 1 ? "GEMM" : "GEMV").make(p, {});
    a.assign(size_t(rows * s.k), 0.5f);
    y.assign(size_t(rows * s.n), 0.0f);
    for (int c = 0; c < copies; ++c) {
      // Copies of the first (their bytes alike; the cache tells them apart by address).
      weights.push_back(c == 0 ? random_weight(s, 1) : weights.front());
      cpu::KernelArgs args;
      iron::Shape as = rows > 1 || int8 ? iron::Shape{rows, s.k} : iron::Shape{s.k};
      iron::Shape ys = rows > 1 || int8 ? iron::Shape{rows, s.n} : iron::Shape{s.n};
      args.in = {cpu::dense_operand(f32, as, reinterpret_cast<char*>(a.data())),
                 cpu::dense_operand(s.w, {s.n, s.k}, weights.back().data())};
      // A weight, as a graph's are: the int8 path rearranges it once (outside the timing).
      args.in[1].prepared = std::make_shared<PreparedForms>();
      args.out = {cpu::dense_operand(f32, ys, reinterpret_cast<char*>(y.data()))};
      args.features = &features(fast);
      args.precision = precision;
      kernels.push_back(cpu::kernels().make(*op, args));
    }
  }
};

// Copies of a weight of shape `s` that together pass what the streaming read reads (four times
// the last-level cache, at least 256 MiB: a weight read cold, as a decode step meets it), or one.
int copies_past(const Shape2& s, bool cold) {
  return cold ? int(std::max<int64_t>(2, int64_t(cpu_device::read_bandwidth_bytes()) / weight_bytes(s) + 1)) : 1;
}

// Times the setup's kernels in turn (each copy of the weight once a round), GB/s of weight read.
void time_rotating(benchmark::State& state, Setup& setup, const Shape2& s, int threads) {
  size_t i = 0;
  for (auto _ : state) {
    cpu::run_kernel(*setup.kernels[i], kWords, threads);
    if (++i == setup.kernels.size()) i = 0;
  }
  benchmark::DoNotOptimize(setup.y.data());
  state.counters["GB/s"] = benchmark::Counter(
      double(weight_bytes(s)) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(s.name);
}

// Args: shape, threads, fast (0 portable, 1 dispatched), cold (1: rotate over copies past the last-level cache).
void BM_GEMV(benchmark::State& state) {
  const Shape2& s = kShapes[state.range(0)];
  const int threads = int(state.range(1));
  const bool fast = state.range(2) != 0, cold = state.range(3) != 0;
  const int copies = copies_past(s, cold);
  Setup setup(s, 1, copies, fast);
  time_rotating(state, setup, s, threads);
}
BENCHMARK(BM_GEMV)
    ->ArgsProduct({shapes(0, kAllShapes), {1, 2}, {0, 1}, {1, 0}})
    ->ArgNames({"shape", "threads", "fast", "cold"})
    ->UseRealTime()
    ->MinTime(0.3);

// One row of a ProjectionGEMM at Precision::medium: the int8 path (x quantised to int8 blocks,
// VNNI dot products) where the host has AVX512_VNNI, else the f32 GEMV. Args: shape, cold,
// threads.
void BM_GEMVInt8(benchmark::State& state) {
  const Shape2& s = kShapes[state.range(0)];
  const bool cold = state.range(1) != 0;
  const int threads = int(state.range(2));
  const int copies = copies_past(s, cold);
  Setup setup(s, 1, copies, true, Precision::medium, true);
  time_rotating(state, setup, s, threads);
}
BENCHMARK(BM_GEMVInt8)
    ->ArgsProduct({shapes(0, kAllShapes), {1, 0}, {1, 2}})
    ->ArgNames({"shape", "cold", "threads"})
    ->UseRealTime()
    ->MinTime(0.3);

// Args: shape (the four SmolLM2 Q4_1 ones, or Gemma's), rows, threads, fast (0 portable, 1 dispatched at highest,
// 2 a ProjectionGEMM at medium: int8 blocks of x where the host has AVX512_VNNI, else bf16
// inputs where it has AVX512_BF16).
void BM_GEMM(benchmark::State& state) {
  const Shape2& s = kShapes[state.range(0)];
  const int64_t rows = state.range(1);
  const int threads = int(state.range(2));
  const bool fast = state.range(3) != 0;
  const bool medium = state.range(3) == 2;
  Setup setup(s, rows, 1, fast, medium ? Precision::medium : Precision::highest, medium);
  for (auto _ : state) {
    cpu::run_kernel(*setup.kernels[0], kWords, threads);
  }
  benchmark::DoNotOptimize(setup.y.data());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(rows * s.k * s.n) * double(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(s.name);
}
BENCHMARK(BM_GEMM)
    ->ArgsProduct({{0, 1, 2, 3}, {64, 512}, {1, 2}, {0, 1, 2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);
// A batched decode step's rows (a server's streams: 1 to 8) on SmolLM2's shapes, the weight
// hot in cache (so the products, not memory, are timed), at medium: the int8 path.
BENCHMARK(BM_GEMM)
    ->ArgsProduct({shapes(0, kSmolShapes), {1, 2, 4, 5, 8, 12, 16, 32}, {1}, {2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);
// The same rows with the weight cold, as a decode step meets each layer's (rotating over copies
// past the last-level cache): whether the products hide the weight's reading or wait on it.
// Args: shape, rows, threads.
void BM_GEMMCold(benchmark::State& state) {
  const Shape2& s = kShapes[state.range(0)];
  const int64_t rows = state.range(1);
  const int threads = int(state.range(2));
  const int copies = copies_past(s, true);
  Setup setup(s, rows, copies, true, Precision::medium, true);
  time_rotating(state, setup, s, threads);
}
BENCHMARK(BM_GEMMCold)
    ->ArgsProduct({shapes(0, kSmolShapes), {1, 5, 8}, {1, 2}})
    ->ArgNames({"shape", "rows", "threads"})
    ->UseRealTime()
    ->MinTime(0.3);
// The other kinds the int8 path takes, either side of the row count from which a batched step's
// rows take AMX-INT8 tiles where it runs (gemm_fast.cpp: q8_0 and the K-quants 9, q5_0 / q5_1 12).
BENCHMARK(BM_GEMM)
    ->ArgsProduct({{6, 7, 9, 10, 11, 12, 13}, {8, 9, 12}, {1}, {2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);
// Gemma's shapes: 64 rows, the dispatched kernels only.
BENCHMARK(BM_GEMM)
    ->ArgsProduct({shapes(kSmolShapes, kEncoderShapes), {64}, {1, 2}, {1, 2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);
// The encoders' shapes: one short sentence (20 rows), a longer one (64), a long one (256), a batch (640), the
// dispatched kernels at highest and at medium.
BENCHMARK(BM_GEMM)
    ->ArgsProduct({shapes(kEncoderShapes, kQwenShapes), {20, 64, 256, 640}, {1}, {1, 2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);
// Qwen2.5-Coder-1.5B's shapes at medium: a short prompt's rows (64) and a prefill's (512).
BENCHMARK(BM_GEMM)
    ->ArgsProduct({shapes(kQwenShapes, kAllShapes), {64, 512}, {1, 2}, {2}})
    ->ArgNames({"shape", "rows", "threads", "fast"})
    ->UseRealTime()
    ->MinTime(0.3);


// Prints the GEMV and GEMM tables side by side after Google Benchmark's own.
class Summary : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string name = r.benchmark_name();
      long a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      const double ns = r.GetAdjustedRealTime();
      if (std::sscanf(name.c_str(), "BM_GEMV/shape:%ld/threads:%ld/fast:%ld/cold:%ld", &a0, &a1,
                      &a2, &a3) == 4)
        gemv_[{int(a0), int(a3)}][int(a1 * 2 + a2)] = ns;
      else if (std::sscanf(name.c_str(), "BM_GEMVInt8/shape:%ld/cold:%ld/threads:%ld", &a0, &a1,
                           &a2) == 3)
        gemv_[{int(a0), int(a1)}][int(5 + a2)] = ns;  // columns 6 and 7: int8, 1 and 2 threads
      else if (std::sscanf(name.c_str(), "BM_GEMM/shape:%ld/rows:%ld/threads:%ld/fast:%ld", &a0,
                           &a1, &a2, &a3) == 4)
        gemm_[{int(a0), int(a1)}][int(a2 * 3 + a3)] = ns;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    // The machine's streaming read, as `iron bench` measures it, at each thread count.
    for (int t : {1, 2}) stream_[t] = cpu_device::measure_read_bandwidth(t);
    for (const auto& [t, gbs] : stream_)
      std::printf("\nstreaming read, %d thread(s): %.1f GB/s", t, gbs);
    std::printf(
        "\n\nGEMV (ns per call, GB/s of weight read; %% of the streaming read at that thread "
        "count)\n");
    std::printf("%-17s %-5s %20s %20s %28s %28s %28s %28s\n", "shape", "data", "portable 1t",
                "portable 2t", "fast 1t", "fast 2t", "int8 (medium) 1t", "int8 (medium) 2t");
    for (const auto& [key, by] : gemv_) {
      const Shape2& s = kShapes[key.first];
      std::printf("%-17s %-5s", s.name, key.second ? "cold" : "hot");
      for (int col : {2, 4, 3, 5, 6, 7}) {
        auto it = by.find(col);
        if (it == by.end()) {
          std::printf(" %20s", "-");
          continue;
        }
        const double gbs = double(weight_bytes(s)) / it->second;
        const int threads = col >= 6 ? col - 5 : col / 2;
        if ((col % 2 || col >= 6) && stream_.count(threads))
          std::printf(" %9.0f ns %5.1f GB/s %3.0f%%", it->second, gbs,
                      100 * gbs / stream_[threads]);
        else
          std::printf(" %9.0f ns %5.1f GB/s", it->second, gbs);
      }
      std::printf("\n");
    }
    std::printf("\nGEMM (us per call, GFLOP/s)\n");
    std::printf("%-17s %-5s %22s %22s %22s %22s %22s %22s\n", "shape", "rows", "portable 1t",
                "portable 2t", "fast 1t", "fast 2t", "medium 1t", "medium 2t");
    for (const auto& [key, by] : gemm_) {
      const Shape2& s = kShapes[key.first];
      std::printf("%-17s %-5d", s.name, key.second);
      for (int col : {3, 6, 4, 7, 5, 8}) {
        auto it = by.find(col);
        if (it == by.end()) {
          std::printf(" %22s", "-");
          continue;
        }
        std::printf(" %9.0f us %6.1f GF/s", it->second / 1e3,
                    2.0 * double(key.second * s.k * s.n) / it->second);
      }
      std::printf("\n");
    }
  }

 private:
  std::map<std::pair<int, int>, std::map<int, double>> gemv_, gemm_;
  std::map<int, double> stream_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::printf("host: %s\n", cpu::Features::host().str().c_str());
  Summary reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
