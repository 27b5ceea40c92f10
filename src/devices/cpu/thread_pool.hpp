// A persistent pool of worker threads. A job wakes them once; the workers spin briefly after a job
// before sleeping, so back-to-back calls (a decode loop) never pay a wake-up.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace iron::cpu {

/// All threads of a job meet here between two commands. Sense-reversing, spinning.
class Barrier {
 public:
  explicit Barrier(int threads = 1) : threads_(threads) {}
  void reset(int threads) {
    threads_ = threads;
    waiting_.store(0, std::memory_order_relaxed);
    release_.store(false, std::memory_order_relaxed);
  }
  void wait(bool& sense);

 private:
  int threads_;
  alignas(64) std::atomic<int> waiting_{0};
  alignas(64) std::atomic<bool> release_{false};
};

class ThreadPool {
 public:
  using Job = void (*)(void* context, int thread, int threads);

  /// The process-wide pool (the caller counts as one of its threads).
  static ThreadPool& shared(int threads);
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  /// Runs job(context, t, threads) on threads t = 0 (the caller) .. threads-1 and waits for all.
  void run(int threads, Job job, void* context);

 private:
  void work(int index);

  std::vector<std::thread> workers_;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  Job job_ = nullptr;
  void* context_ = nullptr;
  int threads_ = 1;
  std::atomic<bool> stop_{false};
};

class Kernel;
/// Runs one kernel on `threads` threads of the shared pool (thread 0 alone for a serial kernel),
/// as a phase of a program would: how tests and benchmarks call a kernel by itself.
void run_kernel(const Kernel& kernel, const int64_t* words, int threads);

}  // namespace iron::cpu
