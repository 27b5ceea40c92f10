// The thread that owns the model. Requests are queued (bounded: a full queue is the caller's
// 503) and served in order; each one's tokens are handed to its Sequence as they land, where the
// connection's thread waits for them. Up to `parallel` sequences decode together (continuous
// batching, models::BatchDecoder, on every device): each in a cache slot of its own, new
// prompts prefilled a part at a time in the decode step's call where they fit beside its rows
// (else in a call of their own after it), each joining the batch at the next call; a finished
// or cancelled one leaves at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "iron/models/runner.hpp"

namespace iron::serve {

/// One request's work, as the model takes it.
struct Job {
  std::vector<int32_t> prompt;
  int64_t max_tokens = -1;  // -1: until the end of sequence or a full context
  models::Sampling sampling;
  bool stop_at_end = true;
};

/// A request's tokens, from the scheduler's thread to the connection's.
class Sequence {
 public:
  /// Takes every token produced since the last take (appended to `tokens`); returns true when
  /// the sequence is over (then finish() and error() say how). Waits up to `timeout` for news.
  bool take(std::vector<int32_t>& tokens, std::chrono::milliseconds timeout);
  /// Asks the scheduler to stop this sequence (a client gone, a stop string met): it leaves
  /// after the token being produced, or before it starts when still queued.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  /// How it ended: "stop" (end of sequence), "length" (max_tokens or a full context),
  /// "cancelled"; and an error's text when the model failed.
  std::string finish() const;
  std::string error() const;
  int64_t prompt_tokens() const { return prompt_tokens_; }
  /// When the first token was handed over (for time to first token), and the job queued.
  std::chrono::steady_clock::time_point queued_at() const { return queued_at_; }

 private:
  friend class Scheduler;
  void push(int32_t id);
  void end(std::string finish, std::string error = {});

  Job job_;
  int64_t prompt_tokens_ = 0;
  std::chrono::steady_clock::time_point queued_at_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int32_t> pending_;
  bool done_ = false;
  std::string finish_, error_;
};

/// Counters for /metrics.
struct SchedulerStats {
  int64_t queued = 0, active = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // totals
  int64_t sequences = 0;                             // finished, any way
  double tokens_per_second = 0;                      // generated over the last 10 s
};

class Scheduler {
 public:
  /// `parallel`: sequences decoding at once (1 until batching lands); `queue`: requests waiting
  /// beyond them before submit() refuses.
  Scheduler(models::LlamaRunner& runner, int parallel, int queue);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues a job; null when the queue is full or the scheduler is stopping.
  std::shared_ptr<Sequence> submit(Job job);
  /// Sequences queued or decoding.
  int64_t in_flight() const;
  /// Cancels every sequence, queued or decoding (a shutdown past its grace).
  void cancel_all();
  SchedulerStats stats() const;

 private:
  void loop();
  /// Counts `n` generated tokens for /metrics.
  void note(int64_t n);

  models::LlamaRunner& runner_;
  int parallel_, queue_limit_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Sequence>> queue_;
  std::vector<std::shared_ptr<Sequence>> active_;
  bool stopping_ = false;
  SchedulerStats totals_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (when, tokens)
  std::thread thread_;
};

}  // namespace iron::serve
