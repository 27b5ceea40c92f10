// The CPU image: a flat list of kernels run by the persistent pool. Consecutive serial kernels
// form one phase run by thread 0; threads meet at a barrier only between phases.
#include <cpuid.h>

#include <cstdlib>
#include <sstream>

#include "devices/cpu/kernel.hpp"
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

// A kernel whose bytes touched plus multiply-adds come to less than this runs on thread 0 alone,
// whatever it declares: split, it would cost the other threads more in meeting at barriers (a
// fraction of a microsecond each, more when a thread is late) than they save (reading 64 KiB
// from cache, or as many multiply-adds, takes a microsecond or two). Consecutive such kernels
// then share a phase, and a graph made only of them (a small model's decode step) runs with no
// barrier at all.
constexpr int64_t kMinParallelWork = 64 << 10;

class CpuProgram final : public detail::Program {
 public:
  CpuProgram(std::vector<std::unique_ptr<Kernel>> kernels, std::vector<std::string> names,
             const std::vector<bool>& barrier_before, const std::vector<int64_t>& bytes, int threads)
      : kernels_(std::move(kernels)), names_(std::move(names)), threads_(threads), pool_(ThreadPool::shared(threads)) {
    for (size_t i = 0; i < kernels_.size(); ++i)
      parallel_.push_back(kernels_[i]->parallel() && bytes[i] + kernels_[i]->multiply_adds() >= kMinParallelWork);
    // A phase runs until a step needs what an earlier one wrote (or would overwrite what one
    // reads). Consecutive serial kernels also share a phase: thread 0 runs them in order.
    for (size_t i = 0; i < kernels_.size();) {
      Phase p{i, i + 1};
      bool serial = !parallel_[i];  // every kernel of the phase so far runs on thread 0
      while (p.end < kernels_.size() && (!barrier_before[p.end] || (serial && !parallel_[p.end]))) {
        serial = serial && !parallel_[p.end];
        ++p.end;
      }
      phases_.push_back(p);
      i = p.end;
    }
    if (threads_ > pool_.size()) threads_ = pool_.size();
    barrier_ = std::make_unique<Barrier>(threads_);
    for (bool p : parallel_) any_parallel_ |= p;
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
    barrier_->reset(threads, pool_.cpu_clocks());
    pool_.run(threads, &CpuProgram::job, this);
    const int64_t ended = steady_ns();
    if (!pool_.last_run_woke_a_worker())
      governor.report(threads, ended - began, barrier_->stalled_ns() + pool_.last_join_stall_ns(), ended,
                      barrier_->descheduled());
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
    // How many threads take part: all of them, until a barrier finds one was descheduled; then
    // thread 0 runs the rest alone and the others leave (the split changes, the results do not).
    int active = threads;
    for (size_t k = 0; k < self->phases_.size(); ++k) {
      if (thread >= active) {
        ThreadPool::rest_after_this_job();
        return;
      }
      const Phase& p = self->phases_[k];
      for (size_t i = p.begin; i < p.end; ++i) {
        if (self->parallel_[i])
          self->run_kernel(i, thread, active);
        else if (thread == 0)
          self->run_kernel(i, 0, 1);
      }
      if (active > 1 && k + 1 < self->phases_.size()) active = self->barrier_->wait(seat, thread);
    }
  }

  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<bool> parallel_;  // split across threads (else thread 0 runs it)
  std::vector<std::string> names_;
  std::vector<Phase> phases_;
  int threads_;
  ThreadPool& pool_;
  std::unique_ptr<Barrier> barrier_;
  bool any_parallel_ = false;
  const int64_t* words_ = nullptr;
  int64_t single_ = -1;
};

}  // namespace
}  // namespace iron::cpu

namespace iron::detail {

namespace {
// A view with its address resolved, as a kernel reads it.
cpu::Operand operand(const View& v, const std::function<char*(const Place&)>& address) {
  cpu::Operand o;
  o.base = address(v.place);
  o.dtype = v.dtype;
  o.shape = v.shape;
  o.strides = v.strides;
  o.offset = v.offset;
  o.valid = v.valid;
  if (v.ids) o.ids = std::make_shared<cpu::Operand>(operand(*v.ids, address));
  o.fixed_rows = v.fixed_rows;
  o.table_rows = v.table_rows;
  if (v.place.resident && !v.place.resident->is_state) o.prepared = v.place.resident->prepared;
  return o;
}
}  // namespace

std::unique_ptr<Program> lower_cpu(const VersionPlan& plan, const std::function<char*(const Place&)>& address,
                                   int threads) {
  const Recording& recording = plan.recording();
  std::vector<std::unique_ptr<cpu::Kernel>> kernels;
  std::vector<std::string> names;
  std::vector<int64_t> bytes;
  std::vector<bool> barrier_before;
  for (size_t i = 0; i < recording.steps.size(); ++i) {
    const StepPlan& step = plan.steps()[i];
    cpu::KernelArgs a;
    for (const View& v : step.in) a.in.push_back(operand(v, address));
    for (const View& v : step.out) a.out.push_back(operand(v, address));
    a.scalars = step.scalars;
    a.precision = step.precision;
    a.features = &cpu::Features::host();
    kernels.push_back(recording.steps[i].op->cpu_kernel(a));
    names.push_back(recording.steps[i].op->name());
    bytes.push_back(cpu::bytes_touched(a));
    barrier_before.push_back(step.barrier_before);
  }
  return std::make_unique<cpu::CpuProgram>(std::move(kernels), std::move(names), barrier_before, bytes, threads);
}

}  // namespace iron::detail
