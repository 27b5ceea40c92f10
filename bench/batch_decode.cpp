// Aggregate decode speed of models::BatchDecoder at 1, 4 and 8 rows a step (one sequence per
// cache slot), in alternating rounds in one run, each round's figure printed, then min-max:
//   ./build/bench/bench_batch_decode models/SmolLM2-135M-Instruct.Q4_1.gguf [threads] [precision] [TRACE]
// What a server's continuous batching gains when a step reads the weights once for every row.
// With TRACE, the last round's steps are written there as a timeline (bench/trace_summary.py
// says where each step's time went). Then 8 short prompts prefilled one at a time and together
// (BatchDecoder::prefill_parts), alternating: what a server gains when prompts arrive at once;
// with TRACE, the last "together" call is written to TRACE.prefill.json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "iron/io/checkpoint.hpp"
#include "iron/io/gguf.hpp"
#include "iron/models/batch.hpp"
#include "iron/models/llama_config.hpp"
#include "iron/trace.hpp"

using namespace iron;
using namespace iron::models;

namespace {

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [threads] [highest|high|medium] [TRACE.json]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int threads = argc > 2 ? std::stoi(argv[2]) : 0;
  LlamaOptions o;
  o.context = 512;
  o.chunk = 64;
  o.slots = 8;
  o.precision = argc > 3 ? precision_from_name(argv[3]) : Precision::highest;
  const LlamaConfig config = llama_config_from_gguf(io::GgufFile::open(path));
  auto model = make_decoder(config, o);
  model->load_state_dict(llama_state_dict(open_checkpoint(path), config.architecture));
  BatchDecoder batch(*model, {.threads = threads});
  const std::vector<int32_t> prompt{1, 504, 3210, 314, 253, 1345, 29, 7290, 30, 198, 11, 12, 14, 16, 18, 20};
  std::vector<BatchDecoder::Row> rows(8);
  for (int64_t s = 0; s < 8; ++s) {
    rows[size_t(s)] = {s, int64_t(prompt.size()), batch.prefill(s, 0, prompt, {}), 1, {}};
  }
  const int steps = 32, rounds = 3;
  const std::vector<size_t> sizes{1, 4, 8};
  std::map<size_t, std::vector<double>> rates;
  for (size_t b : sizes) batch.step(std::span(rows.data(), b));  // compile each version once, untimed
  for (auto& r : rows) r.position += 1;
  const std::string trace_path = argc > 4 ? argv[4] : "";
  for (int round = 0; round < rounds; ++round)
    for (size_t b : sizes) {
      if (!trace_path.empty() && round == rounds - 1 && b == sizes.front()) trace::start();
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < steps; ++k) {
        const std::vector<int32_t> next = batch.step(std::span(rows.data(), b));
        for (size_t i = 0; i < b; ++i) {
          rows[i].token = next[i];
          ++rows[i].position;
          ++rows[i].step;
        }
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rates[b].push_back(double(b * steps) / seconds);
      std::printf("round %d, %zu rows: %.1f tokens/s aggregate\n", round + 1, b, rates[b].back());
    }
  if (trace::on()) std::printf("trace: %zu spans in %s\n", trace::stop_and_write(trace_path), trace_path.c_str());
  // Eight prompts arriving together: prefilled one at a time (a call per prompt and part), and
  // together (BatchDecoder::prefill_parts: a call per part of every prompt), alternating.
  std::vector<std::vector<int32_t>> prompts(8);
  for (size_t s = 0; s < prompts.size(); ++s)
    for (size_t k = 0; k < 9 + s % 5; ++k) prompts[s].push_back(prompt[(s + k) % prompt.size()]);
  auto one_at_a_time = [&] {
    for (size_t s = 0; s < prompts.size(); ++s) batch.prefill(int64_t(s), 0, prompts[s], {});
  };
  auto together = [&] {
    std::vector<BatchDecoder::Prompt> all;
    for (size_t s = 0; s < prompts.size(); ++s) all.push_back({int64_t(s), 0, prompts[s], 0, {}, 0});
    batch.prefill(all);
  };
  one_at_a_time();  // compile every version once, untimed
  together();
  std::map<std::string, std::vector<double>> prefill_ms;
  for (int round = 0; round < 5; ++round)
    for (const auto& [name, fn] : {std::pair<std::string, std::function<void()>>{"one at a time", one_at_a_time},
                                  {"together", together}}) {
      const bool traced = !trace_path.empty() && round == 4 && name == "together";
      if (traced) trace::start();
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      if (traced) trace::stop_and_write(trace_path + ".prefill.json");
      prefill_ms[name].push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  for (const auto& [name, ms] : prefill_ms) {
    const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
    std::printf("8 prompts of 9-13 ids, %s: %.1f-%.1f ms (5 rounds)\n", name.c_str(), *lo, *hi);
  }
  for (size_t b : sizes) {
    const auto [lo, hi] = std::minmax_element(rates[b].begin(), rates[b].end());
    std::printf("%zu rows: %.1f-%.1f tokens/s aggregate (%d rounds of %d steps)\n", b, *lo, *hi, rounds, steps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a missing or malformed model, a bad argument: said, not a crash
    std::fprintf(stderr, "bench_batch_decode: %s\n", e.what());
    return 1;
  }
}
