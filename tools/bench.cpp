// `iron bench -m MODEL [-p N] [-n N] [-d DEPTH] [-t THREADS] [-r REPS] [-b BATCH] [--contend K]
// [--trace FILE]`: prefill and decode speed as mean and spread over repetitions (quiet, and with
// --contend beside K busy processes), with DEPTH tokens already in the cache, in a table like
// llama-bench's, with the bytes a decoded token reads (weights and cache), the machine's
// streaming-read bandwidth, the fraction of that bound the decode reached, and peak memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "graph/device.hpp"
#include "iron/cpu.hpp"
#include "iron/models/runner.hpp"
#include "iron/trace.hpp"

namespace iron::tools {

namespace {
struct Spread {
  double mean = 0, sd = 0;
};
Spread spread(const std::vector<double>& xs) {
  Spread s;
  for (double x : xs) s.mean += x;
  s.mean /= double(xs.size());
  for (double x : xs) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = xs.size() > 1 ? std::sqrt(s.sd / double(xs.size() - 1)) : 0;
  return s;
}
double mib(double bytes) { return bytes / (1024.0 * 1024.0); }
// The bytes of the file a run maps: the GGUF, or a Hugging Face directory's model.safetensors
// (LlamaRunner::open's rule). Never throws: the figures were measured by the time it is asked.
double mapped_bytes(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path file = fs::is_directory(model, error) ? fs::path(model) / "model.safetensors" : fs::path(model);
  const auto bytes = fs::file_size(file, error);
  return error ? 0.0 : double(bytes);
}
double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0 : xs[xs.size() / 2];
}

// A device other than the CPU: what a decoded token reads, the device's own time per decode step
// and per prefill token (its timestamps: what the host's waits and submits add is left out), and
// the step's bound, measured now on the same clock: the bytes it reads over the copy bandwidth,
// plus its dispatches times an empty dispatch's time.
void device_bound(models::LlamaRunner& runner, const std::string& device, double weight_bytes, double cache_bytes,
                  const std::vector<double>& step_seconds, const std::vector<double>& prefill_token_seconds) {
  std::printf("\nread per decoded token: %.1f MiB of weights + %.1f MiB of cache\n", mib(weight_bytes), mib(cache_bytes));
  if (step_seconds.empty()) {
    std::printf("the %s device keeps no clock of its own here (no timestamps): its time and bound are not measured\n",
                device.c_str());
    return;
  }
  if (!prefill_token_seconds.empty())
    std::printf("prefill: %.1f t/s of device time (median of %zu runs)\n", 1.0 / median(prefill_token_seconds),
                prefill_token_seconds.size());
  const double step = median(step_seconds);
  std::printf("decode: %.3f ms of device time per token, %.1f t/s (median of %zu runs)\n", step * 1e3, 1.0 / step,
              step_seconds.size());
  const auto throughput = detail::device_named(device).measure_throughput();
  if (!throughput) return;
  const int64_t dispatches = runner.decode_device_time().dispatches;
  const double copy_seconds = (weight_bytes + cache_bytes) / throughput->copy_bytes_per_second;
  const double dispatch_seconds = double(dispatches) * throughput->dispatch_seconds;
  std::printf("bound: %.3f ms = %.1f MiB at the copy bandwidth, %.1f GB/s, + %lld dispatches x %.2f us (an empty "
              "dispatch and its barrier); decode took %.2fx its bound\n",
              (copy_seconds + dispatch_seconds) * 1e3, mib(weight_bytes + cache_bytes),
              throughput->copy_bytes_per_second * 1e-9, static_cast<long long>(dispatches),
              throughput->dispatch_seconds * 1e6, step / (copy_seconds + dispatch_seconds));
}
}  // namespace

void add_bench_command(CLI::App& app, bool execute) {
  struct Options {
    ModelOptions common;
    std::string trace;
    int64_t prompt = 512, tokens = 128, chunk = 512, depth = 0;
    int reps = 5, contend = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("bench",
                                     "Measure prefill and decode tokens/s of a Llama-family GGUF model (mean and "
                                     "spread over repetitions), the decode's fraction of the memory-bandwidth bound, "
                                     "and peak memory");
  add_model_options(*cmd, o->common);
  add_integer(*cmd, "-p,--n-prompt", o->prompt, 0, kMaxRows / 2, "Prompt tokens to prefill (0: skip)");
  add_integer(*cmd, "-n,--n-gen", o->tokens, 0, kMaxRows / 2, "Tokens to decode (0: skip)");
  add_integer(*cmd, "-d,--n-depth", o->depth, 0, kMaxRows / 2,
              "Tokens already in the cache when each test starts (prefilled once, not timed), as llama-bench's -d");
  add_integer(*cmd, "-r,--repetitions", o->reps, 1, 1000, "Repetitions of each test");
  add_integer(*cmd, "-b,--batch-size", o->chunk, 1, INT32_MAX, "Prompt rows a prefill call takes (at most -p)");
  add_integer(*cmd, "--contend", o->contend, 0, 256,
              "Also measure beside this many busy-loop processes of its own (a busy machine), alternating "
              "with the quiet runs, and print both");
  cmd->add_option("--trace", o->trace,
                  "Write a timeline of one prefill and a few decode steps (one span per command and thread; on "
                  "Vulkan each step's device time) to this file, in the Chrome trace format (open it in Perfetto)");
  // The callback holds the options: a parse without `execute` (the fuzz target) keeps them too.
  cmd->callback([o, execute] {
    if (!execute) return;
    models::RunnerOptions options = runner_options(o->common);
    options.model.chunk = std::max<int64_t>(1, std::min(o->chunk, std::max<int64_t>(o->prompt, 1)));
    options.model.context = o->depth + o->prompt + o->tokens + 2;
    auto runner = models::LlamaRunner::open(o->common.model, options);
    const auto& c = runner->config();
    int threads = o->common.threads > 0 ? o->common.threads : cpu_device::available_cpus();
    std::printf("model: %s (%s)\n", std::filesystem::path(o->common.model).filename().c_str(), c.describe().c_str());
    const bool on_cpu = options.device == "cpu";
    if (on_cpu)
      std::printf("cpu: %s; threads %d; load %.3f s\n\n", cpu_device::features().c_str(), threads, runner->load_seconds());
    else
      std::printf("%s; load %.3f s\n\n", detail::device_named(options.device).description().c_str(), runner->load_seconds());

    // Made-up token ids spread over the vocabulary: the speed does not depend on which.
    auto made_up = [&](int64_t n) {
      std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 1)));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(1 + (i * 7919) % size_t(c.vocab - 1));
      return ids;
    };
    const std::vector<int32_t> prompt = made_up(o->prompt);
    const int64_t depth = o->depth;
    auto nothing = [](int32_t) {};
    // The device's own time per decode step and per prefill token, where it keeps a clock (a
    // GPU's timestamps): the difference over each measured run.
    std::vector<double> device_step_seconds, device_prefill_token_seconds;
    auto device_seconds_per_run = [](const DeviceTime& before, const DeviceTime& after) {
      return after.runs > before.runs ? (after.seconds - before.seconds) / double(after.runs - before.runs) : 0.0;
    };
    // Decode tokens/s of one run of -n tokens (the first token comes from the prompt's call).
    auto decode = [&] {
      const DeviceTime before = runner->decode_device_time();
      auto s = runner->generate({prompt[0]}, o->tokens + 1, nothing, false, depth);
      if (double t = device_seconds_per_run(before, runner->decode_device_time()); t > 0) device_step_seconds.push_back(t);
      return double(s.generated_tokens - 1) / s.generate_seconds;
    };
    std::vector<double> pp, tg, busy_pp, busy_tg;
    auto measure = [&](std::vector<double>& p, std::vector<double>& t) {
      if (o->prompt > 0) {
        const DeviceTime before = runner->prefill_device_time();
        auto s = runner->generate(prompt, 0, nothing, false, depth);
        const DeviceTime after = runner->prefill_device_time();
        if (after.runs > before.runs) device_prefill_token_seconds.push_back((after.seconds - before.seconds) / double(s.prompt_tokens));
        p.push_back(double(s.prompt_tokens) / s.prompt_seconds);
      }
      if (o->tokens > 0) t.push_back(decode());
    };
    // The depth's tokens fill the cache once; every test continues after them and overwrites
    // only what comes after.
    if (depth > 0) runner->generate(made_up(depth), 0, nothing, false);
    runner->generate(prompt, 2, nothing, false, depth);  // warm up: pages the weights in
    for (int r = 0; r < o->reps; ++r) {
      measure(pp, tg);
      if (o->contend > 0) {
        // A busy machine, alternating with the quiet one so both see the same neighbours.
        cpu_device::BusyProcesses busy(o->contend);
        measure(busy_pp, busy_tg);
      }
    }
    auto row = [&](const char* test, int64_t n, const std::vector<double>& quiet, const std::vector<double>& busy) {
      Spread s = spread(quiet);
      std::string name = test + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "");
      std::printf("| %-14s | %7d | %8.1f ± %5.1f |", name.c_str(), threads, s.mean, s.sd);
      if (!busy.empty()) {
        Spread b = spread(busy);
        std::printf(" %8.1f ± %5.1f | %5.2f |", b.mean, b.sd, b.mean / s.mean);
      }
      std::printf("\n");
    };
    if (o->contend > 0) {
      std::printf("| %-14s | %7s | %16s | %16s | %5s |\n", "test", "threads", "t/s quiet",
                  ("t/s, " + std::to_string(o->contend) + " busy").c_str(), "ratio");
      std::printf("| %-14s | %7s | %16s | %16s | %5s |\n", "--------------", "-------", "----------------",
                  "----------------", "-----");
    } else {
      std::printf("| %-14s | %7s | %16s |\n", "test", "threads", "t/s");
      std::printf("| %-14s | %7s | %16s |\n", "--------------", "-------", "----------------");
    }
    if (!pp.empty()) row("pp", o->prompt, pp, busy_pp);
    Spread d;
    if (!tg.empty()) {
      d = spread(tg);
      row("tg", o->tokens, tg, busy_tg);
    }
    if (o->contend > 0)
      std::printf("\n(busy: %d busy-loop process(es) of this command's own, nice 0; runs then take fewer threads "
                  "while other processes hold cores)\n", o->contend);
    // Peak memory before the bandwidth test, whose buffer is not the model's.
    double peak = double(cpu_device::peak_resident_bytes());
    // What a decoded token reads: every weight once, and the cache's keys and values up to its
    // position (on average the depth and half the decoded run).
    const double weight_bytes = double(runner->weight_bytes_per_token());
    const double cache_bytes = double(runner->cache_bytes_per_token(depth + 1 + o->tokens / 2));
    const double bytes = weight_bytes + cache_bytes;
    // The bound moves with what else the machine's memory serves (on a shared host the same
    // streaming read measured 33 GB/s one minute and 50 the next), so the fraction comes from
    // decode runs and streaming reads taken back to back, three pairs, the median of their ratios.
    std::vector<double> bandwidths, fractions;
    // One prefill and 3 decode steps, each step's commands a span (on Vulkan, each step's device
    // time: the decode steps are then not chained).
    auto write_trace = [&] {
      if (o->trace.empty()) return;
      trace::start();
      runner->generate(prompt, 4, nothing, false, depth);
      size_t spans = trace::stop_and_write(o->trace);
      std::printf("trace: %zu spans of one prefill and 3 decode steps written to %s\n", spans, o->trace.c_str());
    };
    if (!on_cpu) {
      device_bound(*runner, options.device, weight_bytes, cache_bytes, device_step_seconds, device_prefill_token_seconds);
      std::printf("peak memory: %.1f MiB of this process (the device's memory not counted)\n", mib(peak));
      write_trace();
      return;
    }
    // One size for every pair's read, and the one printed (what memory is available moves).
    const size_t read_bytes = cpu_device::read_bandwidth_bytes();
    for (int pair = 0; pair < (tg.empty() ? 1 : 3); ++pair) {
      bandwidths.push_back(cpu_device::measure_read_bandwidth(threads, read_bytes));
      if (!tg.empty()) fractions.push_back(decode() / (bandwidths.back() * 1e9 / bytes));
    }
    const auto [low, high] = std::minmax_element(bandwidths.begin(), bandwidths.end());
    std::printf("\nread per decoded token: %.1f MiB of weights + %.1f MiB of cache (%s keys, %s values); "
                "streaming read of %.0f MiB: %.1f GB/s", mib(weight_bytes), mib(cache_bytes),
                std::string(name(options.model.k_cache_type())).c_str(),
                std::string(name(options.model.v_cache_type())).c_str(),
                mib(double(read_bytes)), *low);
    if (*high > *low) std::printf(" to %.1f GB/s", *high);
    std::printf(" (bound: %.1f t/s", *low * 1e9 / bytes);
    if (*high > *low) std::printf(" to %.1f", *high * 1e9 / bytes);
    std::printf(")");
    if (!fractions.empty()) {
      std::sort(fractions.begin(), fractions.end());
      std::printf("; decode reached %.0f%% of it (median of %zu decode runs, each beside a streaming read)",
                  100.0 * fractions[fractions.size() / 2], fractions.size());
    }
    std::printf("\npeak memory: %.1f MiB (mapped file %.1f MiB + states %.1f MiB + arena %.1f MiB)\n",
                mib(peak), mib(mapped_bytes(o->common.model)),
                mib(double(runner->state_bytes())), mib(double(runner->scratch_bytes())));
    write_trace();
  });
}

}  // namespace iron::tools
