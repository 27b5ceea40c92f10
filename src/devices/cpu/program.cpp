// The CPU image: a flat list of kernels run by the persistent pool. Consecutive serial kernels
// form one phase run by thread 0; threads meet at a barrier only between phases.
#include <cpuid.h>

#include <cstdlib>
#include <sstream>

#include "devices/cpu/thread_pool.hpp"
#include "devices/cpu/trace.hpp"
#include "graph/image.hpp"

namespace iron::cpu {

const Features& Features::host() {
  static const Features features = [] {
    Features f;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
      f.fma = c & (1u << 12);
      f.f16c = c & (1u << 29);
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = b & (1u << 5);
      f.avx512f = b & (1u << 16);
      f.avx512dq = b & (1u << 17);
      f.avx512bw = b & (1u << 30);
      f.avx512vnni = c & (1u << 11);
      f.avx512vl = b & (1u << 31);
      f.amx_bf16 = d & (1u << 22);
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = a & (1u << 5);
    // The OS must also save the wide registers (XCR0): AVX state and, for AVX-512, opmask/ZMM.
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    if (__get_cpuid_count(1, 0, &a, &b, &c, &d) && (c & (1u << 27)))
      __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    bool avx_state = (xcr0_lo & 0x6) == 0x6, avx512_state = (xcr0_lo & 0xe6) == 0xe6;
    f.avx2 = f.avx2 && avx_state;
    f.fma = f.fma && avx_state;
    f.avx512f = f.avx512f && avx512_state;
    f.avx512bw = f.avx512bw && avx512_state;
    f.avx512vl = f.avx512vl && avx512_state;
    f.avx512dq = f.avx512dq && avx512_state;
    f.avx512vnni = f.avx512vnni && avx512_state;
    f.avx512bf16 = f.avx512bf16 && f.avx512f;
#endif
    const char* level = std::getenv("IRON_CPU");
    return level ? f.limited_to(level) : f;
  }();
  return features;
}

Features Features::limited_to(std::string_view level) const {
  Features f = *this;
  if (level == "portable" || level == "avx2") {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512bf16 = f.avx512vnni = false;
    f.amx_bf16 = false;
  }
  if (level == "portable") f.avx2 = f.fma = f.f16c = false;
  return f;
}

std::string Features::str() const {
  std::ostringstream o;
  o << (avx2 ? "avx2 " : "") << (fma ? "fma " : "") << (f16c ? "f16c " : "")
    << (avx512f ? "avx512f " : "") << (avx512bw ? "avx512bw " : "") << (avx512vl ? "avx512vl " : "")
    << (avx512dq ? "avx512dq " : "") << (avx512bf16 ? "avx512bf16 " : "")
    << (avx512vnni ? "avx512vnni " : "") << (amx_bf16 ? "amx-bf16 " : "");
  std::string s = o.str();
  return s.empty() ? "portable" : s.substr(0, s.size() - 1);
}

namespace {

class CpuProgram final : public detail::Program {
 public:
  CpuProgram(std::vector<std::unique_ptr<Kernel>> kernels, std::vector<std::string> names,
             const std::vector<bool>& barrier_before, int threads)
      : kernels_(std::move(kernels)), names_(std::move(names)), threads_(threads), pool_(ThreadPool::shared(threads)) {
    // A phase runs until a step needs what an earlier one wrote (or would overwrite what one
    // reads). Consecutive serial kernels also share a phase: thread 0 runs them in order.
    for (size_t i = 0; i < kernels_.size();) {
      Phase p{i, i + 1};
      bool serial = !kernels_[i]->parallel();  // every kernel of the phase so far runs on thread 0
      while (p.end < kernels_.size() && (!barrier_before[p.end] || (serial && !kernels_[p.end]->parallel()))) {
        serial = serial && !kernels_[p.end]->parallel();
        ++p.end;
      }
      phases_.push_back(p);
      i = p.end;
    }
    if (threads_ > pool_.size()) threads_ = pool_.size();
    for (const auto& k : kernels_) any_parallel_ |= k->parallel();
  }

  void run(const int64_t* words) override {
    words_ = words;
    single_ = -1;
    if (!any_parallel_) {
      pool_.run(1, &CpuProgram::job, this);
      return;
    }
    // How many threads this run takes adapts to what the machine gives (ThreadGovernor); the
    // results do not depend on it. One caller at a time decides, runs and reports.
    std::lock_guard lock(pool_.mutex());
    ThreadGovernor& governor = pool_.governor();
    const int64_t began = steady_ns();
    const int threads = governor.threads_for(threads_, began);
    // Reset before the pool publishes the job, so no thread can reach the barrier first.
    barrier_.reset(threads);
    pool_.run(threads, &CpuProgram::job, this);
    const int64_t ended = steady_ns();
    if (!pool_.last_run_woke_a_worker())
      governor.report(threads, ended - began, barrier_.stalled_ns() + pool_.last_join_stall_ns(), ended);
  }

  void run_one(size_t i, const int64_t* words) override {
    words_ = words;
    single_ = int64_t(i);
    pool_.run(kernels_[i]->parallel() ? threads_ : 1, &CpuProgram::job, this);
  }

  size_t commands() const override { return kernels_.size(); }

 private:
  struct Phase {
    size_t begin, end;
  };

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
    bool sense = false;
    // How many threads take part: all of them, until a barrier finds one was descheduled; then
    // thread 0 runs the rest alone and the others leave (the split changes, the results do not).
    int active = threads;
    for (size_t k = 0; k < self->phases_.size(); ++k) {
      if (thread >= active) return;
      const Phase& p = self->phases_[k];
      for (size_t i = p.begin; i < p.end; ++i) {
        if (self->kernels_[i]->parallel())
          self->run_kernel(i, thread, active);
        else if (thread == 0)
          self->run_kernel(i, 0, 1);
      }
      if (active > 1 && k + 1 < self->phases_.size()) active = self->barrier_.wait(sense);
    }
  }

  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::string> names_;
  std::vector<Phase> phases_;
  int threads_;
  ThreadPool& pool_;
  Barrier barrier_;
  bool any_parallel_ = false;
  const int64_t* words_ = nullptr;
  int64_t single_ = -1;
};

}  // namespace
}  // namespace iron::cpu

namespace iron::detail {

std::unique_ptr<Program> lower_cpu(const Recording& recording, std::vector<cpu::KernelArgs> args,
                                   const std::vector<bool>& barrier_before, int threads) {
  std::vector<std::unique_ptr<cpu::Kernel>> kernels;
  std::vector<std::string> names;
  for (size_t i = 0; i < recording.steps.size(); ++i) {
    kernels.push_back(recording.steps[i].op->cpu_kernel(args[i]));
    names.push_back(recording.steps[i].op->name());
  }
  return std::make_unique<cpu::CpuProgram>(std::move(kernels), std::move(names), barrier_before, threads);
}

}  // namespace iron::detail
