// What iron/cpu.hpp tells tools and benchmarks about the CPU device: features, bandwidth, memory,
// thread counts, and busy processes for measuring a busy machine.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <mutex>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/streaming_read.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/cpu.hpp"
#include "iron/error.hpp"

namespace iron::cpu_device {

std::string features() { return cpu::Features::host().str(); }

int available_cpus() { return iron::available_cpus(); }

int threads_now(int wanted) {
  cpu::ThreadPool& pool = cpu::ThreadPool::shared(1);
  std::lock_guard lock(pool.mutex());
  return std::min(pool.governor().current(wanted), pool.size());
}

BusyProcesses::BusyProcesses(int count) {
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) value_error(std::string("cannot start a busy process: ") + std::strerror(errno));
    if (pid == 0) {
      // The child spins until killed; it touches nothing of the parent's.
      volatile uint64_t n = 0;
      for (;;) n = n + 1;
    }
    pids_.push_back(pid);
  }
  // Let the scheduler place them before anything is timed.
  ::usleep(200'000);
}

BusyProcesses::~BusyProcesses() {
  for (int pid : pids_) ::kill(pid, SIGKILL);
  for (int pid : pids_) ::waitpid(pid, nullptr, 0);
}

namespace {
struct ReadJob {
  const char* data;
  size_t bytes;
  cpu::Features features;
  uint64_t sums[64];
};

void read_part(void* context, int thread, int threads) {
  auto* job = static_cast<ReadJob*>(context);
  auto [begin, end] = cpu::split(int64_t(job->bytes / 64), thread, threads, 2);
  job->sums[thread] = cpu::streaming_read(job->data + begin * 64, end - begin, job->features);
}

// The largest cache's bytes (the last level's), as Linux lists this CPU's caches; 0 if it does not.
size_t largest_cache_bytes() {
  size_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::FILE* f =
        std::fopen(("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size").c_str(), "r");
    if (!f) break;
    unsigned long long size = 0;
    char unit = 0;
    if (std::fscanf(f, "%llu%c", &size, &unit) >= 1)
      largest = std::max(largest, size_t(size) << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0));
    std::fclose(f);
  }
  return largest;
}
}  // namespace

size_t read_bandwidth_bytes() {
  // Four times the last-level cache, so the read comes from memory (a server's L3 of 260 MiB held
  // much of the 256 MiB read before), and no more than an eighth of the machine's memory.
  const size_t memory = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));
  return std::max(size_t(64) << 20,
                  std::min({std::max(size_t(256) << 20, 4 * largest_cache_bytes()), size_t(1) << 30, memory / 8}));
}

double measure_read_bandwidth(int threads, size_t bytes) {
  if (bytes == 0) bytes = read_bandwidth_bytes();
  bytes = bytes / 4096 * 4096;
  std::unique_ptr<char[], void (*)(void*)> buffer(static_cast<char*>(std::aligned_alloc(4096, bytes)), std::free);
  if (!buffer) value_error("cannot allocate " + std::to_string(bytes >> 20) + " MiB for the streaming-read test");
  std::memset(buffer.get(), 1, bytes);
  cpu::ThreadPool& pool = cpu::ThreadPool::shared(threads);
  if (threads <= 0) threads = pool.size();
  ReadJob job{buffer.get(), bytes, cpu::Features::host(), {}};
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    pool.run(threads, &read_part, &job);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(bytes) / s / 1e9);
  }
  volatile uint64_t sink = job.sums[0];
  (void)sink;
  return best;
}

size_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return size_t(usage.ru_maxrss) * 1024;
}

}  // namespace iron::cpu_device
