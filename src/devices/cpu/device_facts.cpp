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
#include <cstring>
#include <memory>
#include <mutex>

#include "devices/cpu/kernel.hpp"
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
  const uint64_t* data;
  size_t words;
  uint64_t sums[64];
};

void read_part(void* context, int thread, int threads) {
  auto* job = static_cast<ReadJob*>(context);
  auto [begin, end] = cpu::split(int64_t(job->words), thread, threads, 64);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (int64_t i = begin; i < end; i += 4) {
    a += job->data[i];
    b += job->data[i + 1];
    c += job->data[i + 2];
    d += job->data[i + 3];
  }
  job->sums[thread] = a + b + c + d;
}
}  // namespace

double measure_read_bandwidth(int threads, size_t bytes) {
  size_t words = bytes / 8 / 64 * 64;
  std::unique_ptr<uint64_t[], void (*)(void*)> buffer(static_cast<uint64_t*>(std::aligned_alloc(4096, words * 8)),
                                                      std::free);
  for (size_t i = 0; i < words; ++i) buffer[i] = i;
  cpu::ThreadPool& pool = cpu::ThreadPool::shared(threads);
  if (threads <= 0) threads = pool.size();
  ReadJob job{buffer.get(), words, {}};
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    pool.run(threads, &read_part, &job);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(words * 8) / s / 1e9);
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
