#include "iron/carried_loop.hpp"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "graph/image.hpp"
#include "graph/recording.hpp"
#include "iron/error.hpp"

namespace iron {

CarriedLoop::CarriedLoop(CompiledGraph& first, CompiledGraph& body, int depth)
    : first_(first), body_(body), depth_(depth) {
  for (CompiledGraph* version : {&first, &body})
    if (!version->has_carry())
      value_error(version->recording().graph +
                  ": a version loops only with carried values; this one returns no iron::carry (so has no Emit)");
  if (&first.graph() != &body.graph()) value_error("first and body are versions of one graph");
  for (const Handle& h : body.recording().inputs)
    if (h.defined()) {
      std::string names;
      for (size_t i = 0; i < body.recording().inputs.size(); ++i)
        if (body.recording().inputs[i].defined()) names += (names.empty() ? "" : ", ") + body.recording().input_names[i];
      value_error(body.recording().graph + ": the looped version takes no tensor, got [" + names + "]");
    }
  if (depth < 1) value_error("depth is at least 1, got " + std::to_string(depth));
}

CarriedLoop::~CarriedLoop() = default;

const CompiledGraph::Result& CarriedLoop::start(std::span<const Tensor> tensors, std::span<const ValueArg> values) {
  const CompiledGraph::Result& r = first_(tensors, values);
  // first's Emit writes body's words: its carried values, and the values it was given, which a
  // body step reads unchanged unless carried.
  std::vector<ValueArg> seeds;
  for (const ValueArg& v : values) seeds.push_back(v);
  for (const auto& [name, value] : r.carried) seeds.push_back({name, value});
  detail::Image& image = body_.image();
  std::vector<ValueArg> readable;
  for (const ValueArg& v : seeds) {
    bool known = false;
    for (const PerCall& p : body_.recording().values) known |= p.name == v.name;
    if (known) readable.push_back(v);
  }
  image.seed(readable);
  started_ = true;
  return r;
}

CarriedLoop::Steps::Steps(CarriedLoop& loop, int64_t count) : loop_(loop), count_(count) {
  if (!loop.started_) value_error("CarriedLoop: start() runs first before any step");
  if (count < 0) value_error("CarriedLoop: a negative step count " + std::to_string(count));
  runner_ = std::thread([this] { device(); });
  // The device thread runs where the host runs now: the host is about to wait on it, so that
  // core is about to be free. Left to the OS, a new thread was often put beside a spinning
  // compute thread and shared its core until the load balancer moved it, milliseconds later
  // (a stories260K decode of 128 tokens then ran at 6k t/s instead of 33k, one run in two).
  const int here = sched_getcpu();
  if (here >= 0 && here < CPU_SETSIZE) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(here, &set);
    pthread_setaffinity_np(runner_.native_handle(), sizeof(set), &set);  // a hint: failure is fine
  }
}

CarriedLoop::Steps::~Steps() {
  stop_.store(true);
  consumed_.store(count_);
  consumed_.notify_all();
  if (runner_.joinable()) runner_.join();
}

// The device side: run k starts once the host is at most depth - 1 steps behind. The host is
// woken (a futex call, and on a machine with as many busy threads as cores a compute thread
// displaced) only when it has waited a while, when the device is half a window ahead of it, or
// at the end: a fast loop then wakes it about once per depth / 2 steps instead of once a step.
void CarriedLoop::Steps::device() {
  using Clock = std::chrono::steady_clock;
  // How stale the host's view may grow: short next to what a person notices in streamed text.
  constexpr auto kNotifyEvery = std::chrono::milliseconds(2);
  try {
    detail::Image& image = loop_.body_.image();
    auto notified_at = Clock::now();
    for (int64_t k = 0; k < count_; ++k) {
      int64_t seen = consumed_.load();
      if (k >= seen + loop_.depth_) {
        completed_.notify_all();  // everything done so far, before waiting on the host
        notified_at = Clock::now();
        for (; k >= seen + loop_.depth_; seen = consumed_.load()) consumed_.wait(seen);
      }
      if (stop_.load()) break;
      image.write_values({});
      image.run();
      image.fill_result(loop_.body_.result_);
      completed_.store(k + 1);
      const auto now = Clock::now();
      // Half the window ahead: the host is woken while the device still has steps to run, so
      // its wake-up (100 us and more in a VM) overlaps them instead of stalling the device.
      const int64_t ahead = k + 1 - consumed_.load();
      if (k + 1 == count_ || 2 * ahead >= loop_.depth_ || now - notified_at >= kNotifyEvery) {
        completed_.notify_all();
        notified_at = now;
      }
    }
  } catch (...) {
    failure_ = std::current_exception();
    completed_.store(count_ + 1);
  }
  // Whatever ended the loop (the count, a stop, a failure), the host learns of it.
  completed_.notify_all();
}

void CarriedLoop::Steps::wait_complete(int64_t k) {
  for (int64_t done = completed_.load(); done <= k; done = completed_.load()) completed_.wait(done);
  if (failure_) std::rethrow_exception(failure_);
}

CarriedLoop::Steps::iterator CarriedLoop::Steps::begin() {
  if (count_ == 0) return end();
  wait_complete(0);
  return iterator(this, 0);
}

CarriedLoop::Steps::iterator& CarriedLoop::Steps::iterator::operator++() {
  ++k_;
  steps_->consumed_.store(k_);
  steps_->consumed_.notify_all();
  if (k_ < steps_->count_) steps_->wait_complete(k_);
  return *this;
}

}  // namespace iron
