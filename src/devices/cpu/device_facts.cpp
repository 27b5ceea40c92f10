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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/streaming_read.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "devices/cpu/weight_memory.hpp"
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
  std::vector<uint64_t> sums;  // one a thread
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

// The first number in file `path`, or -1 where there is none ("max", no file).
long long first_number(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return -1;
  long long v = -1;
  if (std::fscanf(f, "%lld", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

// Bytes this process may still take without pushing others out: the kernel's estimate of
// available memory, and within a container its memory cgroup's limit less what it holds (v2:
// the line "0::PATH" of /proc/self/cgroup, memory.max; v1: "N:memory:PATH",
// memory.limit_in_bytes, a huge number where there is no limit).
size_t memory_available_bytes() {
  size_t available = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) available = std::min(available, size_t(kib) << 10);
    std::fclose(f);
  }
  if (std::FILE* f = std::fopen("/proc/self/cgroup", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      const std::string entry(line);
      const bool v2 = entry.rfind("0::", 0) == 0;
      const size_t memory = entry.find(":memory:");
      if (!v2 && memory == std::string::npos) continue;
      std::string dir = v2 ? "/sys/fs/cgroup" + entry.substr(3) : "/sys/fs/cgroup/memory" + entry.substr(memory + 8);
      while (!dir.empty() && (dir.back() == '\n' || dir.back() == '/')) dir.pop_back();
      const long long limit = first_number(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")),
                      used = first_number(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
      if (limit > 0 && used >= 0) available = std::min(available, size_t(std::max(0LL, limit - used)));
    }
    std::fclose(f);
  }
  return available;
}
}  // namespace

size_t read_bandwidth_bytes() {
  // Four times the last-level cache, so the read comes from memory (a server's L3 of 260 MiB held
  // much of the 256 MiB read before), at most 1 GiB, and no more than a quarter of the memory
  // still available (a model of a container's size loaded beside it must not be pushed out).
  return std::max(size_t(64) << 20, std::min({std::max(size_t(256) << 20, 4 * largest_cache_bytes()), size_t(1) << 30,
                                              memory_available_bytes() / 4}));
}

double measure_read_bandwidth(int threads, size_t bytes) {
  if (bytes == 0) bytes = read_bandwidth_bytes();
  bytes = std::max<size_t>(bytes / 4096 * 4096, 4096);
  // Memory as the weights' prepared forms take it (2 MiB pages where the kernel gives them), so
  // the read meets the TLB as a decode's does (on the Emerald Rapids VM the same 27-33 GB/s as
  // from small pages, three alternating runs each).
  const std::shared_ptr<char> buffer = cpu::weight_memory(bytes);
  std::memset(buffer.get(), 1, bytes);
  cpu::ThreadPool& pool = cpu::ThreadPool::shared(threads);
  if (threads <= 0) threads = pool.size();
  ReadJob job{buffer.get(), bytes, cpu::Features::host(), std::vector<uint64_t>(size_t(threads))};
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
