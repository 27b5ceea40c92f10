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
#include <string>
#include <system_error>

#include "devices/cpu/kernel.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron::cpu {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
// Every pool thread's kernel scratch. It only grows; a grown buffer's predecessor is kept (not
// freed) until exit, so a kernel that fetched it while a nested run grew the scratch (a host
// step compiling another graph) never reads freed memory.
struct SharedScratch {
  size_t floats = 0;
  std::vector<std::unique_ptr<float[], void (*)(void*)>> buffers;
  std::vector<std::unique_ptr<float[], void (*)(void*)>> retired;
};
SharedScratch& shared_scratch() {
  static SharedScratch s;
  return s;
}
}  // namespace

Scratch::Scratch(size_t floats_per_thread) : floats_(floats_per_thread) {
  ThreadPool& pool = ThreadPool::shared(1);
  std::lock_guard lock(pool.mutex());  // no run reads the buffers while they grow
  SharedScratch& s = shared_scratch();
  const size_t threads = size_t(pool.size());
  if (floats_per_thread <= s.floats && s.buffers.size() >= threads) return;
  size_t floats = std::max(floats_per_thread, s.floats);
  size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  // All allocated before any is swapped in: a failure leaves the scratch as it was (a kernel
  // would write through a null one).
  std::vector<std::unique_ptr<float[], void (*)(void*)>> grown;
  for (size_t t = 0; t < threads; ++t) {
    grown.emplace_back(static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))), std::free);
    if (!grown.back()) out_of_memory(int64_t(bytes), "the kernels' scratch of thread " + std::to_string(t));
  }
  for (auto& b : s.buffers) s.retired.push_back(std::move(b));
  s.buffers = std::move(grown);
  s.floats = floats;
}

float* Scratch::get(int thread) const { return shared_scratch().buffers[size_t(thread)].get(); }

namespace {
// How long a worker spins for the next job before sleeping: long enough to span the host's
// work between two decode steps, short enough not to burn a core when idle.
constexpr int kSpinsBeforeSleep = 20000;
// How long a thread spins at a barrier for a thread that is running before sleeping on it.
// Longer than a sleeping thread takes to wake (over 100 us in a VM whose idle vCPU halts): with
// a shorter spin, a waiter woken late finds the other thread already asleep at the next barrier,
// and the two take turns sleeping, one wake-up per phase (seen as ~110 us gaps at every phase of
// a decode step).
constexpr int64_t kBarrierSpinNs = 2'000'000;
// How often a waiter looks at a late thread's CPU clock (a system call of about a microsecond),
// and over how long a span a late thread that got less than a quarter of it counts as
// descheduled: longer than an interrupt or our own host thread's turn, short against a
// scheduler's slice (milliseconds), which is what another process takes. A quiet VM still sees
// such spans now and then (its vCPU held by the hypervisor: 0 ns of CPU over 500 us; 20 to 30
// times in one `iron bench -t 2 -p 0 -n 128 -r 3` of SmolLM2), so the governor's first hold on a
// sighting is short (ThreadGovernor::kHoldNs).
constexpr int64_t kProbeNs = 100'000;
constexpr int64_t kDescheduledSpanNs = 500'000;
constexpr int64_t kWakeSpanNs = 2'000'000;
// A wait this long is a thread descheduled, not an uneven split (those are microseconds): what
// the governor counts. Shorter than a scheduler's slice (a few milliseconds).
constexpr int64_t kStallNs = 300'000;

thread_local bool in_job = false;  // this thread is running a share of a job
thread_local bool rest_after_job = false;  // this worker's share left the run early
}  // namespace

void ThreadPool::rest_after_this_job() { rest_after_job = true; }

Barrier::Barrier(int capacity)
    : arrived_(std::make_unique<std::atomic<uint32_t>[]>(size_t(std::max(capacity, 1)))),
      started_(std::make_unique<std::atomic<bool>[]>(size_t(std::max(capacity, 1)))),
      capacity_(std::max(capacity, 1)) {}

void Barrier::reset(int threads, const clockid_t* clocks, int active, int64_t rejoin_at_ns, int64_t hold_ns) {
  threads = std::min(threads, capacity_);
  active = std::clamp(active, 1, threads);
  threads_.store(active, std::memory_order_relaxed);
  clocks_ = clocks;
  started_threads_ = threads;
  hold_ns_ = hold_ns;
  rejoin_at_ns_.store(rejoin_at_ns, std::memory_order_relaxed);
  held_until_ns_.store(0, std::memory_order_relaxed);
  back_.store(0, std::memory_order_relaxed);
  over_.store(false, std::memory_order_relaxed);
  demote_.store(false, std::memory_order_relaxed);
  for (int t = 0; t < capacity_; ++t) {
    arrived_[size_t(t)].store(0, std::memory_order_relaxed);
    started_[size_t(t)].store(false, std::memory_order_relaxed);
  }
  waiting_.store(0, std::memory_order_relaxed);
  release_.store(false, std::memory_order_relaxed);
  stalled_ns_.store(0, std::memory_order_relaxed);
  slow_.store(false, std::memory_order_relaxed);
  active_.store(active, std::memory_order_relaxed);
}

int64_t Barrier::sit_out() {
  // Read before saying this thread is back: a taking-in can only follow that.
  const uint64_t seen = resume_.load(std::memory_order_acquire);
  const int64_t until = rejoin_at_ns_.load(std::memory_order_relaxed);
  {
    std::unique_lock lock(sleep_mutex_);
    sleeping_.fetch_add(1);
    // Asleep for the hold, so that a process that wants this core has it; woken early only by
    // the end of the run.
    sleep_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until)),
                      [&] { return over_.load(std::memory_order_acquire); });
    sleeping_.fetch_sub(1);
  }
  if (over_.load(std::memory_order_acquire)) return -1;
  back_.fetch_add(1, std::memory_order_acq_rel);
  // Thread 0 looks at every boundary between two commands, microseconds to milliseconds apart.
  for (int spin = 1;; ++spin) {
    const uint64_t now = resume_.load(std::memory_order_acquire);
    if (now != seen) return int64_t(now & 0xffffffffu);
    if (over_.load(std::memory_order_acquire)) {
      // Taken in just before the run's last phase, and the end seen first: the taking-in came
      // before the end, so it shows now.
      const uint64_t last = resume_.load(std::memory_order_acquire);
      return last != seen ? int64_t(last & 0xffffffffu) : -1;
    }
    IRON_PAUSE();
    if ((spin & 63) == 0) sched_yield();
  }
}

int Barrier::take_back(int64_t next_phase) {
  const int out = started_threads_ - 1;
  if (out <= 0 || back_.load(std::memory_order_acquire) != out) return 1;
  back_.store(0, std::memory_order_relaxed);
  threads_.store(started_threads_, std::memory_order_relaxed);
  active_.store(started_threads_, std::memory_order_relaxed);
  const uint64_t takings = (resume_.load(std::memory_order_relaxed) >> 32) + 1;
  // Release: the threads coming back read what thread 0 wrote alone.
  resume_.store(takings << 32 | uint64_t(next_phase), std::memory_order_release);
  return started_threads_;
}

void Barrier::finish() {
  over_.store(true);
  if (sleeping_.load() > 0) {
    std::lock_guard lock(sleep_mutex_);
    sleep_.notify_all();
  }
}

namespace {
int64_t thread_cpu_ns(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

bool Barrier::late_thread_descheduled(uint32_t round, int self, int& probed, int64_t& cpu_then,
                                      int64_t& wall_then) const {
  const int64_t wall_now = steady_ns();
  if (probed >= 0 && arrived_[size_t(probed)].load(std::memory_order_acquire) < round) {
    // The thread looked at last time is still not here: did it run in between?
    const int64_t cpu_now = thread_cpu_ns(clocks_[probed]), span = wall_now - wall_then;
    if (cpu_then < 0 || cpu_now < 0) return false;
    const bool starved = 4 * (cpu_now - cpu_then) < span;
    // A worker still waking from sleep is given longer: a halted vCPU of a quiet VM was seen to
    // take over 500 us to wake; another process holding the core takes a slice or more.
    const int64_t needed = started_[size_t(probed)].load(std::memory_order_acquire) ? kDescheduledSpanNs : kWakeSpanNs;
    if (starved && span >= needed) return true;
    if (starved) return false;  // not running so far: keep watching it
    // It ran: look again from now.
  }
  // Look at (another) late thread from now on.
  probed = -1;
  const int threads = threads_.load(std::memory_order_relaxed);
  for (int t = 0; t < threads; ++t)
    if (t != self && arrived_[size_t(t)].load(std::memory_order_acquire) < round) {
      probed = t;
      break;
    }
  cpu_then = probed >= 0 ? thread_cpu_ns(clocks_[probed]) : -1;
  wall_then = wall_now;
  return false;
}

int Barrier::wait(BarrierSeat& seat, int thread) {
  const bool sense = seat.sense = !seat.sense;
  const uint32_t round = ++seat.round;
  // Read before arriving: the last thread to arrive may change it for the barriers after this.
  const int threads = threads_.load(std::memory_order_relaxed);
  arrived_[size_t(thread)].store(round, std::memory_order_release);
  if (waiting_.fetch_add(1, std::memory_order_acq_rel) == threads - 1) {
    waiting_.store(0, std::memory_order_relaxed);
    // A thread was descheduled (another process wants its core, or the hypervisor its vCPU):
    // the run goes on with thread 0 alone for a hold rather than meet it again at every barrier,
    // and the hold doubles at each sighting in the run. Results do not depend on the count.
    int next = threads;
    if (demote_.exchange(false, std::memory_order_relaxed)) {
      next = 1;
      const int64_t until = steady_ns() + hold_ns_;
      rejoin_at_ns_.store(until, std::memory_order_relaxed);
      held_until_ns_.store(until, std::memory_order_relaxed);
      hold_ns_ = std::min(2 * hold_ns_, ThreadGovernor::kHoldNs << ThreadGovernor::kMaxBackoff);
    }
    threads_.store(next, std::memory_order_relaxed);
    active_.store(next, std::memory_order_relaxed);
    release_.store(sense, std::memory_order_release);
    release_.notify_all();
    return next;
  }
  // Spin (the other threads are usually microseconds away), looking now and then whether a late
  // thread is running at all; sleep once it is not, or after 2 ms: on a machine busier than its
  // cores, a spinning waiter would hold the core the late thread needs.
  const int64_t began = steady_ns();
  int probed = -1;
  int64_t cpu_then = -1, wall_then = 0, last_probe = began;
  bool long_wait = false, descheduled = false;
  for (int spin = 1;; ++spin) {
    if (release_.load(std::memory_order_acquire) == sense) break;
    IRON_PAUSE();
    if ((spin & 63) != 0) continue;
    long_wait = true;  // past the fast path: the wait is timed (a clock read, not per spin)
    const int64_t now = steady_ns();
    if (clocks_ && now - last_probe >= kProbeNs) {
      last_probe = now;
      descheduled = late_thread_descheduled(round, thread, probed, cpu_then, wall_then);
    }
    if (descheduled || now - began > kBarrierSpinNs) {
      if (descheduled) {  // see the last arriver above
        slow_.store(true, std::memory_order_relaxed);
        demote_.store(true, std::memory_order_relaxed);
      }
      while (release_.load(std::memory_order_acquire) != sense) release_.wait(!sense, std::memory_order_acquire);
      break;
    }
  }
  if (long_wait && descheduled) stalled_ns_.fetch_add(steady_ns() - began, std::memory_order_relaxed);
  return active_.load(std::memory_order_relaxed);  // written before the release we acquired
}

int ThreadGovernor::current(int wanted) const { return std::max(1, wanted - fewer_); }

int ThreadGovernor::threads_for(int wanted, int64_t now_ns) {
  if (fewer_ > 0 && now_ns >= hold_until_) {
    // The hold is over: probe with one thread more. Its window decides.
    --fewer_;
    window_wall_ = window_stalled_ = 0;
    hold_until_ = 0;
  }
  return current(wanted);
}

void ThreadGovernor::report(int used, int64_t wall_ns, int64_t stalled_ns, int64_t now_ns, bool descheduled,
                            int64_t held_until_ns) {
  if (used <= 1) return;  // one thread cannot stall on another
  window_wall_ += wall_ns * (used - 1);
  window_stalled_ += std::min(stalled_ns, wall_ns * (used - 1));
  // A thread seen losing its core decides at once: a short run (a small model's prefill takes
  // about a millisecond) cannot afford to lose a window of them first. The first hold is short,
  // since a quiet VM sees such sightings too (see kDescheduledSpanNs); another process's shows
  // again at each probe, and the hold doubles.
  if (window_wall_ < kWindowNs && !descheduled) return;
  const bool contended = descheduled || double(window_stalled_) > kContended * double(window_wall_);
  if (contended && log_level() <= LogLevel::debug)
    log(LogLevel::debug, "thread pool: " + std::to_string(window_stalled_ / 1000) + " us of " +
                             std::to_string(window_wall_ / 1000) + " us waited on descheduled threads; runs take " +
                             std::to_string(std::max(1, used - 1)) + " thread(s) for " +
                             std::to_string((kHoldNs << backoff_) / 1'000'000) + " ms");
  window_wall_ = window_stalled_ = 0;
  if (!contended) {
    // The hold shrinks again one clean window at a time: a probe that happened to run while the
    // other process was off its core does not reset it at once.
    backoff_ = std::max(0, backoff_ - 1);
    return;
  }
  ++fewer_;
  // A sighting's hold began when it was seen, and the run has already kept to it (Barrier): the
  // runs after it keep to what is left of it, not to a new one from now.
  hold_until_ = descheduled && held_until_ns > 0 ? held_until_ns : now_ns + (kHoldNs << backoff_);
  backoff_ = std::min(backoff_ + 1, kMaxBackoff);
}

ThreadPool& ThreadPool::shared(int threads) {
  // Made once, as large as the CPUs this process may use or the first request; images hold a
  // reference to it, so it is never replaced: a later, larger request runs on the threads it has.
  static ThreadPool pool(std::max<int>(threads, available_cpus()));
  return pool;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this, i] { work(i); });
    } catch (const std::system_error& e) {
      // No room for another thread (its stack, under a memory limit): the pool runs on the
      // threads it has, which every run is held to (size()), rather than failing every run.
      log(LogLevel::warning, "the CPU pool started " + std::to_string(i) + " of " + std::to_string(threads) +
                                 " threads: " + e.what());
      break;
    }
  }
  clocks_.assign(size_t(std::max(threads, 1)), CLOCK_THREAD_CPUTIME_ID);
  for (size_t i = 0; i < workers_.size(); ++i) pthread_getcpuclockid(workers_[i].native_handle(), &clocks_[i + 1]);
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run(int threads, Job job, void* context) {
  if (in_job) {
    // Called from inside a share of a job (a host step running another graph): the workers are
    // busy with the outer job, so this one runs here alone.
    job(context, 0, 1);
    return;
  }
  std::lock_guard lock(mutex_);
  struct InJob {
    InJob() { in_job = true; }
    ~InJob() { in_job = false; }
  } mark;
  join_stall_ns_ = 0;
  woke_.store(false, std::memory_order_relaxed);
  pthread_getcpuclockid(pthread_self(), &clocks_[0]);
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
  int64_t began = 0;
  for (int spin = 1; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    IRON_PAUSE();
    if ((spin & 255) == 0) {
      if (began == 0) began = steady_ns();
      sched_yield();
    }
  }
  if (began != 0 && steady_ns() - began >= kStallNs) join_stall_ns_ = steady_ns() - began;
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
  in_job = true;  // a worker only ever runs shares of jobs
  block_asynchronous_signals();
  uint32_t seen = 0;
  bool slept = false;
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
      slept = true;
      continue;
    }
    seen = now;
    if (stop_.load()) return;
    bool rest = true;  // a worker left out of a run sleeps: runs take fewer threads for a while
    if (index < threads_) {
      // A worker that slept joins late by its wake-up (over 100 us in a VM): the run's waits on
      // it say nothing about other processes, so the governor does not count them.
      if (slept) woke_.store(true, std::memory_order_relaxed);
      slept = false;
      rest_after_job = false;
      job_(context_, index, threads_);
      rest = rest_after_job;
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (rest) {
      // Sleep until the next job, not spin: the core this worker would spin on is the one the
      // other process, or our own thread 0, needs.
      generation_.wait(seen, std::memory_order_acquire);
      slept = true;
    }
  }
}

}  // namespace iron::cpu
