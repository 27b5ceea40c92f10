// Started runs of one graph's versions, run in order on the device's own thread while the host
// goes on: what CompiledGraph::start() hands a run to and Run::wait() waits on. Every version of
// a graph shares the arena, so one queue per graph serialises them. On the CPU the "device" is
// a thread (thread 0 of the pool while it runs a version); a GPU device would submit instead.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "iron/tensor.hpp"

namespace iron {
class CompiledGraph;
}

namespace iron::detail {

/// Runs a graph's queue holds at once (a host with this many in flight waits for the oldest).
inline constexpr int64_t kRunSlots = 64;

class RunQueue {
 public:
  /// One started call: its version, its tensors (views the caller keeps valid until it is
  /// waited for) and its per-call values.
  struct Task {
    CompiledGraph* version;
    std::vector<Tensor> tensors;
    std::vector<std::pair<std::string, int64_t>> values;
    // What the run's carried values became, written by the device thread after it ran.
    std::vector<int64_t> carried;
  };

  RunQueue() = default;
  ~RunQueue();
  RunQueue(const RunQueue&) = delete;
  RunQueue& operator=(const RunQueue&) = delete;

  /// Queues a task; returns its ticket (0, 1, 2, ... in order).
  int64_t push(Task task);
  /// Waits until run `ticket` is complete, and rethrows what stopped it. The device wakes a
  /// waiting host lazily (see run_queue.cpp): the host may sleep past the run it waits for
  /// while the device stays busy, so that one wake-up serves several runs.
  void wait(int64_t ticket);
  bool complete(int64_t ticket) const { return completed_.load() > ticket; }
  /// Waits until every run started so far is complete (their failures stay with their tickets).
  void drain();
  /// Drops the runs from `ticket` up to the last one pushed now that the device has not begun:
  /// they complete without running, failed with a cancellation error.
  void cancel(int64_t ticket);
  int64_t pushed() const { return pushed_.load(); }
  /// The carried values run `ticket` emitted, once complete (until kSlots more are pushed).
  const std::vector<int64_t>& carried(int64_t ticket) const { return slots_[size_t(ticket % kSlots)].carried; }


 private:
  void device();
  /// Moves the device thread to the core the caller runs on now (see run_queue.cpp).
  void place_beside_caller();
  int placed_on_ = -1;
  bool failed(int64_t ticket) const { return ticket >= failed_from_ && ticket < failed_to_; }

  // Tasks wait in a ring indexed by ticket: the host writes slot `ticket % kSlots` before it
  // publishes `pushed_`, the device reads it after, so the two never share a lock (a lock taken
  // by both every run cost a futex call whenever they met). A host with kSlots runs in flight
  // waits for the oldest before starting another.
  static constexpr int64_t kSlots = kRunSlots;
  std::vector<Task> slots_ = std::vector<Task>(kSlots);
  std::mutex push_mutex_;     // callers that start runs on several threads take turns
  std::mutex failure_mutex_;  // guards the failure, taken only when there is one
  std::atomic<bool> any_failure_{false};
  // A cancelled range [cancel_from_, cancel_to_), read by the device before each run when
  // cancel_pending_ says there is one (both under failure_mutex_).
  std::atomic<bool> cancel_pending_{false};
  int64_t cancel_from_ = 0, cancel_to_ = 0;
  std::exception_ptr failure_;
  int64_t failed_from_ = 0, failed_to_ = 0;  // tickets that failed or were dropped after one did
  std::atomic<int64_t> pushed_{0};
  std::atomic<int64_t> completed_{0};
  // The ticket the host waits for (-1: none), and how many runs were in flight when it began.
  std::atomic<int64_t> waiting_for_{-1};
  std::atomic<int64_t> window_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> device_idle_{false};  // the device thread sleeps, or is about to
  std::thread thread_;
};

}  // namespace iron::detail
