// The CPU's program: a flat list of kernels run by the persistent pool. Consecutive serial
// kernels form one phase run by thread 0; threads meet at a barrier only between phases.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <sstream>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "devices/cpu/trace.hpp"
#include "devices/cpu/program.hpp"
#include "iron/log.hpp"

namespace iron::cpu {

// Bytes a kernel reads and writes at its largest: a gathered view counts the rows it reads.
int64_t bytes_touched(const KernelArgs& args) {
  auto bytes = [](const Operand& o) {
    const DTypeInfo& i = info(o.dtype);
    int64_t elements = o.ids ? element_count(o.ids->shape) * o.row_elements() : element_count(o.shape);
    return elements / i.block * i.bytes;
  };
  int64_t total = 0;
  for (const Operand& o : args.in) total += bytes(o);
  for (const Operand& o : args.out) total += bytes(o);
  return total;
}

// Before a kernel has been timed, one whose bytes touched plus multiply-adds come to less than
// this runs on thread 0 alone, whatever it declares: split, it would cost the other threads more
// in meeting at barriers (a fraction of a microsecond each, more when a thread is late) than they
// save (reading 64 KiB from cache, or as many multiply-adds, takes a microsecond or two).
// Consecutive such kernels then share a phase, and a graph made only of them (a small model's
// decode step) runs with no barrier at all.
constexpr int64_t kMinParallelWork = 64 << 10;

// Then the program times its kernels (every kTimedEvery-th run, on thread 0, the least of
// kTimedRuns such runs: a time slice lost inside a kernel only ever adds) and splits exactly
// those whose one-thread time is at least kSplitNs; one already split goes back to thread 0
// under kJoinNs (the gap keeps a kernel near the line from flipping every decision).
// No byte count tells the two apart: stories260K's classifier (about 166 Ki of bytes and
// multiply-adds, ~6 us) saves nothing split (1 and 2 threads decode at the same speed on a quiet
// machine) but, beside another busy process, each run at two threads risks waiting out that
// process's time slice (milliseconds, a hundred decode steps); SmolLM2's f32 attention at a short
// context (about 200 Ki, over 10 us) is worth its barrier. Times are re-taken as long as the
// program runs, so a kernel that grows with the context (decode attention) is split once it is
// worth it. The split never changes results, only who computes which outputs.
constexpr int64_t kSplitNs = 10'000;
constexpr int64_t kJoinNs = 6'000;
constexpr uint64_t kTimedEvery = 32;
constexpr int kTimedRuns = 4;

namespace {

class CpuProgram final : public detail::Program {
 public:
  CpuProgram(std::vector<std::unique_ptr<Kernel>> kernels, std::vector<std::string> names,
             const std::vector<bool>& barrier_before, const std::vector<int64_t>& bytes, int threads)
      : kernels_(std::move(kernels)), names_(std::move(names)), barrier_before_(barrier_before), threads_(threads),
        pool_(ThreadPool::shared(threads)), fastest_ns_(kernels_.size(), kNotTimed) {
    for (size_t i = 0; i < kernels_.size(); ++i)
      parallel_.push_back(kernels_[i]->parallel() && bytes[i] + kernels_[i]->multiply_adds() >= kMinParallelWork);
    if (threads_ > pool_.size()) threads_ = pool_.size();
    barrier_ = std::make_unique<Barrier>(threads_);
    form_phases();
  }

  void run(const int64_t* words) override {
    words_ = words;
    single_ = -1;
    // Only a program with more than one thread has a split to decide.
    timed_ = threads_ > 1 && runs_++ % kTimedEvery == 1;  // not the first run: its caches are cold
    if (!any_parallel_) {
      pool_.run(1, &CpuProgram::job, this);
    } else {
      // How many threads this run takes adapts to what the machine gives (ThreadGovernor); the
      // results do not depend on it. One caller at a time decides, runs and reports.
      std::lock_guard lock(pool_.mutex());
      ThreadGovernor& governor = pool_.governor();
      const int64_t began = steady_ns();
      const int threads = governor.threads_for(threads_, began);
      // A run held to fewer threads that will outlast the hold (if it takes as long as the last
      // one: a long prefill after a sighting) starts them all, the ones held out sitting out
      // until the hold is over, then taken back.
      const int64_t held_until = governor.holding_until();
      const bool sit_out_the_hold = threads < threads_ && held_until - began < last_wall_ns_;
      const int started = sit_out_the_hold ? threads_ : threads;
      // Reset before the pool publishes the job, so no thread can reach the barrier first.
      barrier_->reset(started, pool_.cpu_clocks(), threads, sit_out_the_hold ? held_until : 0, governor.hold_ns());
      pool_.run(started, &CpuProgram::job, this);
      const int64_t ended = steady_ns();
      last_wall_ns_ = ended - began;
      // A run that had to wake a sleeping worker waited on that wake-up, not on another process:
      // its waits are not counted, but a thread seen off its core (by its clock, given time to
      // wake) is.
      const int64_t stalled = pool_.last_run_woke_a_worker() ? 0 : barrier_->stalled_ns() + pool_.last_join_stall_ns();
      governor.report(threads, ended - began, stalled, ended, barrier_->descheduled(), barrier_->held_until_ns());
    }
    if (timed_ && ++timed_runs_ == kTimedRuns) decide_split();
  }

  void run_one(size_t i, const int64_t* words) override {
    words_ = words;
    single_ = int64_t(i);
    pool_.run(parallel_[i] ? threads_ : 1, &CpuProgram::job, this);
  }

  size_t commands() const override { return kernels_.size(); }

 private:
  struct Phase {
    size_t begin, end;
  };
  static constexpr int64_t kNotTimed = INT64_MAX;

  // A phase runs until a step needs what an earlier one wrote (or would overwrite what one
  // reads). Consecutive serial kernels also share a phase: thread 0 runs them in order.
  void form_phases() {
    phases_.clear();
    for (size_t i = 0; i < kernels_.size();) {
      Phase p{i, i + 1};
      bool serial = !parallel_[i];  // every kernel of the phase so far runs on thread 0
      while (p.end < kernels_.size() && (!barrier_before_[p.end] || (serial && !parallel_[p.end]))) {
        serial = serial && !parallel_[p.end];
        ++p.end;
      }
      phases_.push_back(p);
      i = p.end;
    }
    any_parallel_ = false;
    for (bool p : parallel_) any_parallel_ = any_parallel_ || p;
  }

  // Between runs (no thread reads the phases now): splits the kernels that take long enough on
  // one thread, from the times of the last kTimedRuns timed runs.
  void decide_split() {
    bool changed = false;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const int64_t t = fastest_ns_[i];
      fastest_ns_[i] = kNotTimed;
      if (!kernels_[i]->parallel() || t == kNotTimed) continue;
      const bool split = parallel_[i] ? t >= kJoinNs : t >= kSplitNs;
      changed = changed || split != parallel_[i];
      parallel_[i] = split;
    }
    timed_runs_ = 0;
    if (!changed) return;
    form_phases();
    if (log_level() <= LogLevel::debug) {
      // Kernels by name, split or not: "GEMV 150/180" means 150 of the 180 GEMVs are split.
      std::map<std::string, std::pair<int, int>> counts;
      for (size_t i = 0; i < kernels_.size(); ++i)
        if (kernels_[i]->parallel()) {
          auto& [split, all] = counts[names_[i]];
          split += parallel_[i];
          ++all;
        }
      std::ostringstream m;
      m << "cpu program: kernels split across threads (of those that can be), from their one-thread times:";
      for (const auto& [name, c] : counts) m << " " << name << " " << c.first << "/" << c.second;
      log(LogLevel::debug, m.str());
    }
  }

  // Thread 0's time for kernel i in a timed run, as one thread's: a split kernel's share times
  // the threads that shared it.
  void note_time(size_t i, int64_t ns, int threads) {
    fastest_ns_[i] = std::min(fastest_ns_[i], ns * threads);
  }

  // Runs kernel i's share; with tracing on, records it as a span.
  void run_kernel(size_t i, int thread, int threads) const {
    if (!trace_enabled.load(std::memory_order_relaxed)) {
      kernels_[i]->run(words_, thread, threads);
      return;
    }
    int64_t begin = now_ns();
    kernels_[i]->run(words_, thread, threads);
    trace_span(names_[i].c_str(), thread, begin, now_ns());
  }

  static void job(void* context, int thread, int threads) {
    auto* self = static_cast<CpuProgram*>(context);
    if (self->single_ >= 0) {
      self->run_kernel(size_t(self->single_), thread, threads);
      return;
    }
    BarrierSeat seat;
    Barrier& barrier = *self->barrier_;
    if (threads > 1) barrier.start(thread);
    // How many threads take part: all of them, until a barrier finds one was descheduled; then
    // thread 0 runs alone for a hold while the others sit out, and takes them back between two
    // phases once the hold is over (the split changes, the results do not).
    int active = threads > 1 ? barrier.active() : 1;
    const size_t phases = self->phases_.size();
    for (size_t k = 0; k < phases; ++k) {
      if (thread >= active) {
        const int64_t resume = barrier.sit_out();
        if (resume < 0) {  // the run ended while this thread sat out
          ThreadPool::rest_after_this_job();
          return;
        }
        k = size_t(resume);
        active = barrier.active();
      }
      const Phase& p = self->phases_[k];
      for (size_t i = p.begin; i < p.end; ++i) {
        const bool split = self->parallel_[i];
        if (thread != 0) {
          if (split) self->run_kernel(i, thread, active);
        } else if (self->timed_) {
          const int64_t began = steady_ns();
          self->run_kernel(i, 0, split ? active : 1);
          self->note_time(i, steady_ns() - began, split ? active : 1);
        } else {
          self->run_kernel(i, 0, split ? active : 1);
        }
      }
      if (k + 1 == phases) break;
      if (active > 1) {
        active = barrier.wait(seat, thread);
      } else if (thread == 0 && threads > 1) {
        active = barrier.take_back(int64_t(k + 1));
      }
    }
    if (thread == 0 && threads > 1) barrier.finish();
  }

  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<bool> parallel_;  // split across threads (else thread 0 runs it)
  std::vector<std::string> names_;
  std::vector<bool> barrier_before_;
  std::vector<Phase> phases_;
  int threads_;
  ThreadPool& pool_;
  std::unique_ptr<Barrier> barrier_;
  bool any_parallel_ = false;
  const int64_t* words_ = nullptr;
  int64_t single_ = -1;
  uint64_t runs_ = 0;
  int64_t last_wall_ns_ = 0;          // the last run's time
  bool timed_ = false;                // this run times its kernels
  int timed_runs_ = 0;                // timed runs since the last decision
  std::vector<int64_t> fastest_ns_;  // per kernel: its least one-thread time in those runs
};

}  // namespace

std::unique_ptr<detail::Program> make_program(std::vector<std::unique_ptr<Kernel>> kernels, std::vector<std::string> names,
                                              const std::vector<bool>& barrier_before, const std::vector<int64_t>& bytes,
                                              int threads) {
  return std::make_unique<CpuProgram>(std::move(kernels), std::move(names), barrier_before, bytes, threads);
}

}  // namespace iron::cpu
