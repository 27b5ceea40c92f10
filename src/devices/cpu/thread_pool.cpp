#include "devices/cpu/thread_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define IRON_PAUSE() _mm_pause()
#else
#define IRON_PAUSE() ((void)0)
#endif

#include <cstdlib>
#include <memory>

#include "devices/cpu/kernel.hpp"

namespace iron::cpu {

namespace {
struct SharedScratch {
  size_t floats = 0;
  std::vector<std::unique_ptr<float[], void (*)(void*)>> buffers;
};
SharedScratch& shared_scratch() {
  static SharedScratch s;
  return s;
}
}  // namespace

Scratch::Scratch(size_t floats_per_thread) : floats_(floats_per_thread) {
  SharedScratch& s = shared_scratch();
  const size_t threads = size_t(ThreadPool::shared(1).size());
  if (floats_per_thread <= s.floats && s.buffers.size() >= threads) return;
  size_t floats = std::max(floats_per_thread, s.floats);
  size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  s.buffers.clear();
  for (size_t t = 0; t < threads; ++t)
    s.buffers.emplace_back(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))), std::free);
  s.floats = floats;
}

float* Scratch::get(int thread) const { return shared_scratch().buffers[size_t(thread)].get(); }

namespace {
// How long a worker spins for the next job before sleeping: long enough to span the host's
// work between two decode steps, short enough not to burn a core when idle.
constexpr int kSpinsBeforeSleep = 20000;
// How long a thread spins at a barrier before sleeping on it. Longer than a sleeping thread
// takes to wake (over 100 us in a VM whose idle vCPU halts): with a shorter spin, a waiter woken
// late finds the other thread already asleep at the next barrier, and the two take turns
// sleeping, one wake-up per phase (seen as ~110 us gaps at every phase of a decode step).
constexpr auto kBarrierSpin = std::chrono::microseconds(2000);
}  // namespace

void Barrier::wait(bool& sense) {
  sense = !sense;
  if (waiting_.fetch_add(1, std::memory_order_acq_rel) == threads_ - 1) {
    waiting_.store(0, std::memory_order_relaxed);
    release_.store(sense, std::memory_order_release);
    release_.notify_all();
    return;
  }
  // Spin a little (the other threads are usually microseconds away), then sleep: on a machine
  // busier than its cores, a spinning waiter would hold the core the last thread needs.
  const auto give_up = std::chrono::steady_clock::now() + kBarrierSpin;
  for (int spin = 1;; ++spin) {
    if (release_.load(std::memory_order_acquire) == sense) return;
    IRON_PAUSE();
    if ((spin & 63) == 0 && std::chrono::steady_clock::now() > give_up) break;
  }
  while (release_.load(std::memory_order_acquire) != sense) release_.wait(!sense, std::memory_order_acquire);
}

ThreadPool& ThreadPool::shared(int threads) {
  // Made once, as large as the machine or the first request; images hold a reference to it, so
  // it is never replaced: a later, larger request runs on the threads it has.
  static ThreadPool pool(std::max<int>(threads, int(std::thread::hardware_concurrency())));
  return pool;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run(int threads, Job job, void* context) {
  if (threads > size()) threads = size();
  if (threads <= 1) {
    job(context, 0, 1);
    return;
  }
  job_ = job;
  context_ = context;
  threads_ = threads;
  pending_.store(threads - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  job(context, 0, threads);
  for (int spin = 1; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    IRON_PAUSE();
    if ((spin & 255) == 0) sched_yield();
  }
}

void run_kernel(const Kernel& kernel, const int64_t* words, int threads) {
  struct Call {
    const Kernel& kernel;
    const int64_t* words;
  } call{kernel, words};
  auto job = [](void* context, int thread, int count) {
    auto* c = static_cast<Call*>(context);
    c->kernel.run(c->words, thread, count);
  };
  ThreadPool::shared(threads).run(kernel.parallel() ? threads : 1, job, &call);
}

void ThreadPool::work(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinsBeforeSleep; ++spin) {
      IRON_PAUSE();
      // Yield now and then: on a machine with as many busy threads as cores, a host thread
      // woken to take a finished step must not wait out a spinning worker's time slice.
      if ((spin & 63) == 63) sched_yield();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = now;
    if (stop_.load()) return;
    if (index < threads_) {
      job_(context_, index, threads_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace iron::cpu
