#include "graph/run_queue.hpp"

#include <pthread.h>
#include <sched.h>

#include <system_error>

#include "core/threads.hpp"
#include "iron/error.hpp"
#include "iron/graph.hpp"

namespace iron::detail {

RunQueue::~RunQueue() {
  if (!thread_.joinable()) return;
  drain();
  stop_.store(true);
  pushed_.fetch_add(1);  // a change the device thread wakes for
  pushed_.notify_all();
  thread_.join();
}

int64_t RunQueue::push(Task task) {
  std::lock_guard lock(push_mutex_);
  // The device thread starts before a run is published: one that cannot start (no room for its
  // stack under a memory limit) fails this push, where a run published with no thread to take
  // it left the next wait (~Graph's drain()) waiting for ever.
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { device(); });
    } catch (const std::system_error& e) {
      value_error(std::string("cannot start the thread that runs a graph's calls: ") + e.what() +
                  " (too little memory for its stack, or too many threads)");
    }
  }
  const int64_t ticket = pushed_.load();
  if (ticket - completed_.load() >= kSlots) wait(ticket - kSlots);  // the ring is full
  slots_[size_t(ticket % kSlots)] = std::move(task);
  pushed_.store(ticket + 1);  // publishes the slot
  // The first run of a burst: the host that starts it is about to wait, or to do little.
  if (ticket == completed_.load()) place_beside_caller();
  // A futex call only when the device sleeps: most pushes find it busy with earlier runs.
  if (device_idle_.load()) pushed_.notify_one();
  return ticket;
}

void RunQueue::wait(int64_t ticket) {
  if (ticket >= pushed_.load()) return;
  if (completed_.load() <= ticket) {
    window_.store(pushed_.load() - completed_.load());
    waiting_for_.store(ticket);
    for (int64_t c = completed_.load(); c <= ticket; c = completed_.load()) completed_.wait(c);
    waiting_for_.store(-1);
  }
  if (!any_failure_.load()) return;
  std::lock_guard lock(failure_mutex_);
  if (failed(ticket)) std::rethrow_exception(failure_);
}

void RunQueue::drain() {
  const int64_t last = pushed_.load() - 1;
  if (last < 0 || completed_.load() > last) return;
  window_.store(0);
  waiting_for_.store(last);
  for (int64_t c = completed_.load(); c <= last; c = completed_.load()) completed_.wait(c);
  waiting_for_.store(-1);
}

void RunQueue::cancel(int64_t ticket) {
  std::lock_guard lock(failure_mutex_);
  cancel_from_ = ticket;
  cancel_to_ = pushed_.load();
  cancel_pending_.store(ticket < cancel_to_);
}

// The device side: runs tasks in order. A waiting host is woken (a futex call, and on a machine
// with as many busy threads as cores, a compute thread displaced) only when the device has
// nothing left to run, when at most half the runs that were in flight as the host began to
// wait are left, or when 2 ms passed since the last wake-up: a fast loop then wakes its host
// about once per half window instead of once a run, and the host's wake-up (100 us and more
// in a VM) overlaps the runs still queued instead of stalling the device.
void RunQueue::device() {
  block_asynchronous_signals();  // the application's handlers (libedit's) run on its threads
  using Clock = std::chrono::steady_clock;
  constexpr auto kNotifyEvery = std::chrono::milliseconds(2);  // short next to what a person notices
  auto notified_at = Clock::now();
  for (;;) {
    const int64_t k = completed_.load();
    for (int64_t p = pushed_.load(); p == k; p = pushed_.load()) {
      if (waiting_for_.load() >= 0) {
        completed_.notify_all();  // everything done so far, before sleeping
        notified_at = Clock::now();
      }
      device_idle_.store(true);
      // Checked again after saying so: a push that missed the flag is seen here.
      if (pushed_.load() == p) pushed_.wait(p);
      device_idle_.store(false);
    }
    if (stop_.load()) return;
    if (cancel_pending_.load()) {
      // Runs the host no longer wants: completed unrun, as a failure drops the runs after it.
      std::lock_guard lock(failure_mutex_);
      // Kept for a range still ahead of the device; done with once it is reached or passed.
      if (k >= cancel_from_) cancel_pending_.store(false);
      if (k >= cancel_from_ && k < cancel_to_) {
        failure_ = std::make_exception_ptr(Error(ErrorKind::value, "the run was cancelled before it began"));
        failed_from_ = k;
        failed_to_ = cancel_to_;
        for (int64_t t = k; t < failed_to_; ++t) slots_[size_t(t % kSlots)] = Task{};
        any_failure_.store(true);
        completed_.store(failed_to_);
        completed_.notify_all();
        continue;
      }
    }
    Task task = std::move(slots_[size_t(k % kSlots)]);
    try {
      std::vector<ValueArg> values;
      for (const auto& [name, value] : task.values) values.push_back({name, value});
      const RunResult& result = task.version->run_now(task.tensors, values);
      // The slot is the host's again only once it pushes kSlots more runs.
      std::vector<int64_t>& carried = slots_[size_t(k % kSlots)].carried;
      carried.clear();
      for (const auto& item : result.carried) carried.push_back(item.second);
    } catch (...) {
      // This run failed; the ones queued after it read what it would have carried, so they
      // are dropped with the same error. Runs pushed after this look run as usual: their slots
      // lie outside the dropped ones (a push waits while kSlots runs are in flight).
      std::lock_guard lock(failure_mutex_);
      failure_ = std::current_exception();
      failed_from_ = k;
      failed_to_ = pushed_.load();
      for (int64_t t = k + 1; t < failed_to_; ++t) slots_[size_t(t % kSlots)] = Task{};
      any_failure_.store(true);
      completed_.store(failed_to_);
      completed_.notify_all();
      continue;
    }
    completed_.store(k + 1);
    const int64_t waited = waiting_for_.load();
    if (waited >= 0 && waited <= k) {
      const int64_t left = pushed_.load() - (k + 1);
      const auto now = Clock::now();
      if (left == 0 || 2 * left <= window_.load() || now - notified_at >= kNotifyEvery) {
        completed_.notify_all();
        notified_at = now;
      }
    }
  }
}

// The device thread runs where the host runs now: a host that starts a burst of runs is about
// to wait on them, so its core is about to be free. Left to the OS, the thread was often put
// beside a spinning compute thread and shared its core until the load balancer moved it,
// milliseconds later (a stories260K decode of 128 tokens then ran at 6k t/s instead of 33k, one
// run in two). A hint, renewed only when the host has moved: failure is fine.
void RunQueue::place_beside_caller() {
  const int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || here == placed_on_) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(here, &set);
  if (pthread_setaffinity_np(thread_.native_handle(), sizeof(set), &set) == 0) placed_on_ = here;
}

}  // namespace iron::detail
