// A batched decode step's attention (Attention with slot_rows: each row its own cache slot and
// position) on SmolLM2-135M's shape (9 heads over 3 kv heads, head_dim 64, an f16 cache as
// medium keeps it), the caches hot: microseconds a call, median and min-max of the rounds.
//   ./build/bench/bench_slot_attention [rows=8] [depth=4000] [skew=1] [threads=2] [rounds=7]
// Row 0 attends to `depth` keys and every other row to depth / skew: skew 1 is rows in step,
// a large skew one long conversation beside fresh requests (how a server's rows differ). Build
// it on two revisions and run them in turns to compare the kernels.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/kernel_table.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/cpu.hpp"
#include "iron/operator.hpp"

using namespace iron;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8, depth = argc > 2 ? std::atoll(argv[2]) : 4000;
  const int64_t skew = std::max<int64_t>(1, argc > 3 ? std::atoll(argv[3]) : 1);
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2, rounds = std::max(1, argc > 5 ? std::atoi(argv[5]) : 7);
  if (rows < 1 || depth < 1) {
    std::fprintf(stderr, "rows and depth are at least 1\n");
    return 1;
  }
  const int64_t heads = 9, kv_heads = 3, d = 64, slot_rows = depth + 1, ctx = slot_rows * rows;
  const DType cache = f16;
  std::vector<float> values(size_t(ctx * kv_heads * d));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(int64_t(i * 2654435761u % 2001) - 1000) / 1000.0f;
  std::vector<char> k(size_t(storage_bytes(cache, int64_t(values.size())))), v(k.size());
  from_f32(cache, values.data(), k.data(), int64_t(values.size()));
  from_f32(cache, values.data(), v.data(), int64_t(values.size()));
  std::vector<float> q(size_t(rows * heads * d), 0.05f), y(q.size());
  std::vector<int32_t> positions(static_cast<size_t>(rows)), slots(static_cast<size_t>(rows));
  for (int64_t b = 0; b < rows; ++b) {
    positions[size_t(b)] = int32_t(b == 0 ? depth - 1 : std::max<int64_t>(0, depth / skew - 1));
    slots[size_t(b)] = int32_t(b);
  }
  auto op = catalog_entry("Attention")
                .make({{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", d}, {"ctx", ctx}, {"slot_rows", slot_rows}}, {});
  const Shape qs{rows, heads, d}, cs{ctx, kv_heads, d};
  cpu::KernelArgs args;
  args.in = {cpu::dense_operand(f32, qs, reinterpret_cast<char*>(q.data()), cpu::WordRef{0, 0}),
             cpu::dense_operand(cache, cs, k.data(), cpu::WordRef{1, 0}),
             cpu::dense_operand(cache, cs, v.data(), cpu::WordRef{1, 0}),
             cpu::dense_operand(DType::i32, Shape{rows}, reinterpret_cast<char*>(positions.data())),
             cpu::dense_operand(DType::i32, Shape{rows}, reinterpret_cast<char*>(slots.data()))};
  args.out = {cpu::dense_operand(f32, qs, reinterpret_cast<char*>(y.data()), cpu::WordRef{0, 0})};
  args.scalars = {{2, 0}};
  args.features = &cpu::Features::host();
  args.precision = Precision::medium;
  const std::unique_ptr<cpu::Kernel> kernel = cpu::kernels().make(*op, args);
  const int64_t words[3] = {rows, ctx, 0};  // rows, cache rows, the start scalar (not read)
  cpu::ThreadPool::shared(threads);
  std::vector<double> us;
  for (int r = 0; r <= rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    int calls = 0;
    double elapsed = 0;
    do {
      for (int n = 0; n < 16; ++n, ++calls) cpu::run_kernel(*kernel, words, threads);
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < 0.1);
    if (r > 0) us.push_back(1e6 * elapsed / calls);  // round 0 warms up
  }
  std::sort(us.begin(), us.end());
  std::printf("%lld rows (row 0 at %lld keys, the others at %lld), %d threads: %.1f us a call [%.1f, %.1f]\n",
              static_cast<long long>(rows), static_cast<long long>(depth),
              static_cast<long long>(std::max<int64_t>(1, depth / skew)), threads, us[us.size() / 2], us.front(),
              us.back());
  return 0;
}
