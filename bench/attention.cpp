// Decode attention (one query row) at depths of 512, 2048 and 4096 keys, on SmolLM2-135M's shape
// (9 heads over 3 kv heads, head_dim 64) and Gemma 3's (4 heads over 1, head_dim 256), for caches
// of f32, f16, bf16 and q8_0: the kernel before grouped tiles (path=per_head) against the grouped
// one, alternated round by round in one run so that both see the same machine. The caches are
// read cold, as a decode step reads each layer's: calls rotate over copies larger than the
// last-level cache. GB/s counts the cache bytes read (keys and values); "of stream" is that over
// `iron bench`'s streaming read (cpu_device::measure_read_bandwidth) on as many threads.
//   ./build/bench/bench_attention [threads=2] [rounds=7] [cold|hot] ["words the rows' names hold"] [medium] [prefill]
// (hot: one copy of the caches, read from the processor's caches: what the kernel computes at;
// medium: the grouped kernel at highest against itself at medium, which rounds a q8_0 cache's
// queries for int8 scores where VNNI runs; prefill: 64 query rows, the depth's last, rather
// than one: a prefill's tiles, each reading the keys once for its rows; GB/s then counts the
// cache's bytes once for each query row, what as many decode steps would read).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/cpu.hpp"
#include "iron/handle.hpp"
#include "iron/operator.hpp"

using namespace iron;

namespace {

struct Model {
  const char* name;
  int64_t heads, kv_heads, d;
};
const Model kModels[] = {{"SmolLM2", 9, 3, 64}, {"Gemma3", 4, 1, 256}};
const int64_t kDepths[] = {512, 2048, 4096};
const DType kCaches[] = {f32, f16, bf16, DType::q8_0};

// Every copy of a model's caches at one depth and dtype, one kernel per copy and path.
struct Setup {
  int64_t cache_bytes = 0;  // one call's keys and values
  int64_t row_bytes = 0;    // those once for each query row
  std::vector<float> q, y;
  std::vector<std::unique_ptr<cpu::Kernel>> kernels[2];  // [0]: per_head (or highest), [1]: grouped (or medium)
  int64_t words[3];

  Setup(const Model& m, int64_t depth, DType t, const std::vector<char>& pool, bool hot, bool medium, int64_t rows) {
    const iron::Shape qs{rows, m.heads, m.d}, cs{depth, m.kv_heads, m.d};
    cache_bytes = 2 * storage_bytes(t, element_count(cs));
    row_bytes = cache_bytes * rows;
    q.assign(size_t(rows * m.heads * m.d), 0.1f);
    y.assign(q.size(), 0.0f);
    words[0] = rows, words[1] = depth, words[2] = depth - rows;  // rows, cache rows, start: every key
    const int64_t copies = hot ? 1 : std::max<int64_t>(2, int64_t(pool.size()) / cache_bytes);
    for (int path = 0; path < 2; ++path) {
      std::shared_ptr<Operator> op = catalog_entry("Attention")
                                         .make({{"heads", m.heads}, {"kv_heads", m.kv_heads}, {"head_dim", m.d}, {"ctx", depth}},
                                               {{"path", std::string(path || medium ? "grouped" : "per_head")}});
      for (int64_t c = 0; c < copies; ++c) {
        char* k = const_cast<char*>(pool.data()) + c * cache_bytes;
        cpu::KernelArgs args;
        args.in = {cpu::dense_operand(f32, qs, reinterpret_cast<char*>(q.data()), cpu::WordRef{0, 0}), cpu::dense_operand(t, cs, k, cpu::WordRef{1, 0}),
                   cpu::dense_operand(t, cs, k + cache_bytes / 2, cpu::WordRef{1, 0})};
        args.out = {cpu::dense_operand(f32, qs, reinterpret_cast<char*>(y.data()), cpu::WordRef{0, 0})};
        args.scalars = {{2, 0}};
        args.features = &cpu::Features::host();
        args.precision = medium && path ? Precision::medium : Precision::highest;
        kernels[path].push_back(cpu::kernels().make(*op, args));
      }
    }
  }

  // GB/s of one path over calls taking at least `seconds`: of the caller's CPU time on one
  // thread (a busy machine's other processes then cost it less), of wall time on more.
  double time(int path, int threads, double seconds) {
    auto now = [&] {
      timespec t;
      clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
      return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
    };
    const auto& ks = kernels[path];
    size_t i = 0;
    int64_t calls = 0;
    const double begin = now();
    double elapsed = 0;
    do {
      for (int n = 0; n < 16; ++n, ++calls) {
        cpu::run_kernel(*ks[i], words, threads);
        if (++i == ks.size()) i = 0;
      }
      elapsed = now() - begin;
    } while (elapsed < seconds);
    return double(row_bytes) * double(calls) / elapsed / 1e9;
  }
};

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const bool hot = argc > 3 && std::string(argv[3]) == "hot";  // one copy: what the kernel computes at
  const std::string only = argc > 4 ? argv[4] : "";  // "SmolLM2", "f16", "Gemma3 q8_0": these rows alone
  bool medium = false;  // highest against medium
  int64_t query_rows = 1;  // a decode step's, or a prefill's 64
  for (int i = 5; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "medium") {
      medium = true;
    } else if (flag == "prefill") {
      query_rows = 64;
    } else {
      std::fprintf(stderr, "bench_attention: unknown flag '%s' (medium, prefill)\n", argv[i]);
      return 1;
    }
  }
  cpu::ThreadPool::shared(threads);
  const double stream = cpu_device::measure_read_bandwidth(threads);
  std::printf("%s attention, %d threads, %d rounds alternating the paths, caches %s; streaming read %.1f GB/s\n",
              query_rows > 1 ? "prefill (64 query rows)" : "decode", threads, rounds, hot ? "hot" : "cold", stream);
  std::printf("GB/s (by %s time): median [min, max] of the rounds\n", threads == 1 ? "CPU" : "wall");
  std::printf("%-8s %-5s %6s  %-24s %-24s %8s %10s\n", "model", "cache", "depth",
              medium ? "highest GB/s" : "per_head GB/s", medium ? "medium GB/s" : "grouped GB/s",
              "speedup", "of stream");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> values(size_t(1) << 22);  // 16 MiB of random values, repeated to fill each pool
  for (float& x : values) x = u(rng);
  for (DType t : kCaches) {
    std::vector<std::pair<const Model*, int64_t>> rows;  // the (model, depth) rows `only` wants
    for (const Model& m : kModels)
      for (int64_t depth : kDepths) {
        const std::string row = std::string(m.name) + " " + std::string(name(t)) + " " + std::to_string(depth);
        bool wanted = true;
        for (size_t at = 0; at < only.size();) {  // every word of `only` is in the row's name
          const size_t space = std::min(only.find(' ', at), only.size());
          wanted = wanted && row.find(only.substr(at, space - at)) != std::string::npos;
          at = space + 1;
        }
        if (wanted) rows.push_back({&m, depth});
      }
    if (rows.empty()) continue;
    // The pool of copies in this dtype, past the last-level cache: as many bytes as the streaming
    // read reads (four times that cache, at least 256 MiB), the elements that fill them.
    const int64_t pool_bytes = int64_t(cpu_device::read_bandwidth_bytes());
    const int64_t elements = pool_bytes / storage_bytes(t, 32) * 32;
    std::vector<char> pool(static_cast<size_t>(pool_bytes));
    for (int64_t at = 0; at < elements; at += int64_t(values.size())) {
      const int64_t n = std::min<int64_t>(int64_t(values.size()), elements - at);
      from_f32(t, values.data(), pool.data() + storage_bytes(t, at), n);
    }
    for (auto [model, depth] : rows) {
      const Model& m = *model;
      Setup s(m, depth, t, pool, hot, medium, query_rows);
      s.time(0, threads, 0.05), s.time(1, threads, 0.05);  // warm up both
      std::vector<double> gbs[2];
      for (int r = 0; r < rounds; ++r)
        for (int path = 0; path < 2; ++path) gbs[path].push_back(s.time(path, threads, 0.1));
      char cell[2][64];
      for (int path = 0; path < 2; ++path)
        std::snprintf(cell[path], sizeof cell[path], "%6.1f [%5.1f, %5.1f]", median(gbs[path]),
                      *std::min_element(gbs[path].begin(), gbs[path].end()),
                      *std::max_element(gbs[path].begin(), gbs[path].end()));
      std::printf("%-8s %-5s %6lld  %-24s %-24s %7.2fx %9.0f%%\n", m.name, std::string(name(t)).c_str(),
                  static_cast<long long>(depth), cell[0], cell[1], median(gbs[1]) / median(gbs[0]),
                  100 * median(gbs[1]) / stream);
      std::fflush(stdout);
    }
  }
  return 0;
}
