// The cost of calling a compiled image: a graph of N small steps (SiLU on 16 floats), called
// back to back. Prints Google Benchmark's table, then the cost of a one-step call and of each
// further step, fitted over N, for 1 and 2 threads.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>

#include "iron/iron.hpp"

namespace F = iron::functional;
using namespace iron;

namespace {

struct Chain : Graph {
  Input x = input("x");
  int steps;
  explicit Chain(int n) : Graph("chain"), steps(n) {}
  Outputs body() override {
    Handle h = x;
    for (int i = 0; i < steps; ++i) h = F::silu(h);
    return {h};
  }
};

void BM_Call(benchmark::State& state) {
  Chain chain(int(state.range(0)));
  CompiledGraph& image = chain.compile({{"x", {16}}}, {.threads = int(state.range(1))});
  Tensor x = Tensor::zeros({16}, f32);
  for (auto _ : state) benchmark::DoNotOptimize(image({x}).outputs[0].data());
  state.counters["steps"] = double(state.range(0));
}
BENCHMARK(BM_Call)->ArgsProduct({{1, 2, 4, 8, 16, 32}, {1, 2}})->ArgNames({"steps", "threads"});

// Records each run's time per call to print the fitted summary after the table.
class Summary : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      int steps = int(r.counters.at("steps"));
      int threads = r.run_name.function_name.empty() ? 1 : (r.benchmark_name().find("threads:2") != std::string::npos ? 2 : 1);
      ns_[threads][steps] = r.GetAdjustedRealTime();
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nsummary (least-squares over steps 1..32):\n");
    std::printf("%8s %18s %22s\n", "threads", "one-step call (us)", "each further step (us)");
    for (const auto& [threads, by_steps] : ns_) {
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (const auto& [steps, ns] : by_steps) {
        n += 1, sx += steps, sy += ns, sxx += double(steps) * steps, sxy += steps * ns;
      }
      double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
      std::printf("%8d %18.3f %22.3f\n", threads, by_steps.at(1) / 1000.0, slope / 1000.0);
    }
  }

 private:
  std::map<int, std::map<int, double>> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Summary reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
