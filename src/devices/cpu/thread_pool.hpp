// A persistent pool of worker threads. A job wakes them once; the workers spin briefly after a job
// before sleeping, so back-to-back calls (a decode loop) never pay a wake-up. The pool serves
// one run at a time: callers on several threads queue for it. How many threads a run takes
// adapts to what the machine gives (ThreadGovernor): on a core that another process wants, a
// thread of ours is descheduled for milliseconds and every barrier waits for it, so once a
// barrier sees a thread lose its core (by that thread's CPU clock) the run goes on with one
// thread for a hold, the others sitting out asleep, and the runs after it keep to the hold.
// Results do not change with the count: every kernel computes each output element on one
// thread, in an order that does not depend on the split.
#pragma once

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/threads.hpp"

namespace iron::cpu {

// available_cpus() and block_asynchronous_signals(), which the pool uses too, are the
// operating system's (core/threads.hpp): the graph layer's run queue needs them as well.

/// A thread's place at a Barrier: its sense and how many waits it has arrived at this run.
struct BarrierSeat {
  bool sense = false;
  uint32_t round = 0;
};

/// All threads of a job meet here between two commands. Sense-reversing, spinning, then
/// sleeping. A waiter that has spun a while looks at the CPU clock of a thread that has not
/// arrived: one that got less than a quarter of the time since is descheduled (another process
/// holds its core, or the hypervisor its vCPU), not slow. Then thread 0 goes on alone for a hold
/// (the last thread to arrive decides, so every thread leaves with the same answer) and the
/// others sit out, asleep, rather than be waited for again at every barrier. Once the hold is
/// over they come back: thread 0 takes them in again between two commands.
///
/// Why a hold and not the rest of the run: a quiet VM's vCPU is held by the hypervisor for half
/// a millisecond or more now and then (15 to 60 times in one `iron bench -t 2 -p 0 -n 128 -r 3`),
/// and a run can be long (a 512-token prefill, half a second), so leaving the rest of it to one
/// thread ran 7 of 12 of Gemma 3's prefills in three `iron bench -r 4` at about half speed
/// (~550 against ~1050 tokens/s) on a quiet machine. A process that keeps
/// the core shows again when the thread comes back, and each sighting in a run doubles the hold.
class Barrier {
 public:
  /// `capacity`: the most threads a run may take.
  explicit Barrier(int capacity = 1);
  /// Before a run that the pool starts on `threads` threads; `clocks[t]` is thread t's CPU-time
  /// clock. `active` of them (the first) take part from its first command; the others sit out
  /// until `rejoin_at_ns` (steady_ns()). `hold_ns`: how long threads sit out after a sighting.
  void reset(int threads, const clockid_t* clocks, int active, int64_t rejoin_at_ns, int64_t hold_ns);
  /// Thread `thread` has begun its share of the run (a worker woken for it is awake).
  void start(int thread) { started_[size_t(thread)].store(true, std::memory_order_release); }
  /// Waits for every thread; returns how many take part from here on (1 after a stall).
  int wait(BarrierSeat& seat, int thread);
  /// A thread left out (not thread 0): sleeps until the hold is over, then waits for thread 0 to
  /// take it in again. Returns the phase to go on from, or -1 once the run is over.
  int64_t sit_out();
  /// Thread 0, alone, between two commands (the next is phase `next_phase`): takes the threads
  /// that sat out in again if all of them are back. Returns how many take part from here on.
  int take_back(int64_t next_phase);
  /// Thread 0, its share of the run done: sends threads still sitting out home.
  void finish();
  /// The time until which the last sighting of the run held threads out (0: none).
  int64_t held_until_ns() const { return held_until_ns_.load(std::memory_order_relaxed); }
  /// Time threads spent waiting on a descheduled thread, since reset().
  int64_t stalled_ns() const { return stalled_ns_.load(std::memory_order_relaxed); }
  /// Whether a waiter found a thread descheduled since reset().
  bool descheduled() const { return slow_.load(std::memory_order_relaxed); }
  /// How many threads take part now (read at a run's start, and by a thread coming back).
  int active() const { return active_.load(std::memory_order_relaxed); }

 private:
  /// Whether a late thread, looked at over the waiter's spin, got less than half a core.
  bool late_thread_descheduled(uint32_t round, int self, int& probed, int64_t& cpu_then, int64_t& wall_then) const;

  std::atomic<int> threads_{1};
  const clockid_t* clocks_ = nullptr;
  std::unique_ptr<std::atomic<uint32_t>[]> arrived_;  // per thread: the last round it reached
  std::unique_ptr<std::atomic<bool>[]> started_;      // per thread: it has begun the run
  int capacity_;
  alignas(64) std::atomic<int> waiting_{0};
  alignas(64) std::atomic<bool> release_{false};
  alignas(64) std::atomic<int64_t> stalled_ns_{0};
  std::atomic<bool> slow_{false};  // a waiter found a thread descheduled this run
  std::atomic<bool> demote_{false};  // ... and the barrier has not yet sent the others out for it
  std::atomic<int> active_{1};     // threads taking part after the last release
  // Sitting out: the run's thread count, the hold, when the threads out may come back, how many
  // are back and waiting to be taken in, and the phase they go on from (its high half counts
  // the takings-in, so a thread sees a new one).
  int started_threads_ = 1;
  int64_t hold_ns_ = 0;
  std::atomic<int64_t> rejoin_at_ns_{0}, held_until_ns_{0};
  alignas(64) std::atomic<int> back_{0};
  std::atomic<uint64_t> resume_{0};
  std::atomic<bool> over_{false};
  std::atomic<int> sleeping_{0};
  std::mutex sleep_mutex_;
  std::condition_variable sleep_;
};

/// Decides how many threads the next run takes. A run in which a barrier saw a thread lose its
/// core, or runs whose threads lost more than a fifth of their time waiting (over a window of
/// 10 ms of the waiting threads' time), mean another process may hold one of our cores: runs
/// then take one thread fewer, for a hold that doubles (10 ms up to 640 ms) each time a probe
/// at the larger count stalls again, and halves with each clean window.
/// A clean window keeps the larger count and halves the hold again. A quiet machine's rare
/// stall (an interrupt, our own host thread waking on a busy core) stays under the share; a
/// 4 ms window was not long enough for that.
class ThreadGovernor {
 public:
  static constexpr int64_t kWindowNs = 10'000'000;
  static constexpr double kContended = 0.2;
  static constexpr int64_t kHoldNs = 10'000'000;
  static constexpr int kMaxBackoff = 6;

  /// Threads for a run that asks for `wanted`, at time `now_ns`.
  int threads_for(int wanted, int64_t now_ns);
  /// A run of `used` threads took `wall_ns`, of which threads waited `stalled_ns` on stalls;
  /// `descheduled`: a barrier saw, by its CPU clock, that a thread of the run lost its core, and
  /// held it out until `held_until_ns` (0: the hold starts now).
  void report(int used, int64_t wall_ns, int64_t stalled_ns, int64_t now_ns, bool descheduled = false,
              int64_t held_until_ns = 0);
  /// What runs take now when they ask for `wanted` (for reports; no side effect).
  int current(int wanted) const;
  /// How long the next sighting holds a thread out.
  int64_t hold_ns() const { return kHoldNs << backoff_; }
  /// While runs take fewer threads: until when (0: they do not).
  int64_t holding_until() const { return fewer_ > 0 ? hold_until_ : 0; }

 private:
  int fewer_ = 0;              // threads taken off what runs ask for
  int64_t hold_until_ = 0;     // while now < this, runs take `fewer_` off
  int backoff_ = 0;            // doublings of the hold
  int64_t window_wall_ = 0, window_stalled_ = 0;
};

class ThreadPool {
 public:
  using Job = void (*)(void* context, int thread, int threads);

  /// The process-wide pool, as large as the CPUs this process may run on or the first request.
  static ThreadPool& shared(int threads);
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  /// Runs job(context, t, threads) on threads t = 0 (the caller) .. threads-1 and waits for all.
  /// Callers on other threads wait their turn; a run started from inside a job (a host step
  /// calling another graph) runs on the calling thread alone.
  void run(int threads, Job job, void* context);
  /// Time the caller waited for the others at the end of the last run, in long waits only.
  int64_t last_join_stall_ns() const { return join_stall_ns_; }
  /// Whether a worker of the last run had gone to sleep before it (its wake-up delayed the run).
  bool last_run_woke_a_worker() const { return woke_.load(std::memory_order_relaxed); }
  /// The CPU-time clocks of the last run's threads (thread 0: the caller).
  const clockid_t* cpu_clocks() const { return clocks_.data(); }
  /// Called by a worker's share of a job that leaves the rest of the run to others: the worker
  /// sleeps after the job instead of spinning for the next, leaving the core to whoever holds it.
  static void rest_after_this_job();

  /// Serialises runs, and the growth of the shared kernel scratch with them.
  std::recursive_mutex& mutex() { return mutex_; }
  ThreadGovernor& governor() { return governor_; }

 private:
  void work(int index);

  std::vector<std::thread> workers_;
  std::vector<clockid_t> clocks_;  // per thread; [0] is set by each run to its caller's
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  Job job_ = nullptr;
  void* context_ = nullptr;
  int threads_ = 1;
  std::atomic<bool> stop_{false};
  std::recursive_mutex mutex_;
  int64_t join_stall_ns_ = 0;
  std::atomic<bool> woke_{false};
  ThreadGovernor governor_;
};

/// Nanoseconds of a steady clock.
int64_t steady_ns();

class Kernel;
/// Runs one kernel on `threads` threads of the shared pool (thread 0 alone for a serial kernel),
/// as a phase of a program would: how tests and benchmarks call a kernel by itself.
void run_kernel(const Kernel& kernel, const int64_t* words, int threads);

}  // namespace iron::cpu
