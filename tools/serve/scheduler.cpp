#include "serve/scheduler.hpp"

#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron::serve {

using Clock = std::chrono::steady_clock;

bool Sequence::take(std::vector<int32_t>& tokens, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  tokens.insert(tokens.end(), pending_.begin(), pending_.end());
  pending_.clear();
  return done_;
}

std::string Sequence::finish() const {
  std::lock_guard lock(mutex_);
  return finish_;
}

std::string Sequence::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Sequence::push(int32_t id) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(id);
  }
  changed_.notify_all();
}

void Sequence::end(std::string finish, std::string error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    finish_ = std::move(finish);
    error_ = std::move(error);
  }
  changed_.notify_all();
}

Scheduler::Scheduler(models::LlamaRunner& runner, int parallel, int queue)
    : runner_(runner), parallel_(parallel), queue_limit_(queue) {
  if (parallel_ < 1 || queue_limit_ < 0) value_error("the scheduler takes at least one sequence and a queue >= 0");
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& s : queue_) s->cancel();
    if (active_) active_->cancel();
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<Sequence> Scheduler::submit(Job job) {
  auto s = std::make_shared<Sequence>();
  s->prompt_tokens_ = int64_t(job.prompt.size());
  s->job_ = std::move(job);
  s->queued_at_ = Clock::now();
  {
    std::lock_guard lock(mutex_);
    // `parallel` sequences hold slots (one decodes at a time until batching lands); the queue
    // holds `queue` more.
    if (stopping_ || int64_t(queue_.size()) + (active_ ? 1 : 0) >= int64_t(parallel_) + queue_limit_) return nullptr;
    queue_.push_back(s);
  }
  wake_.notify_all();
  return s;
}

int64_t Scheduler::in_flight() const {
  std::lock_guard lock(mutex_);
  return int64_t(queue_.size()) + (active_ ? 1 : 0);
}

void Scheduler::cancel_all() {
  std::lock_guard lock(mutex_);
  for (auto& s : queue_) s->cancel();
  if (active_) active_->cancel();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = totals_;
  s.queued = int64_t(queue_.size());
  s.active = active_ ? 1 : 0;
  const auto now = Clock::now();
  int64_t tokens = 0;
  for (const auto& [when, n] : recent_)
    if (now - when <= std::chrono::seconds(10)) tokens += n;
  s.tokens_per_second = double(tokens) / 10.0;
  return s;
}

void Scheduler::loop() {
  for (;;) {
    std::shared_ptr<Sequence> s;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      s = queue_.front();
      queue_.pop_front();
      active_ = s;
    }
    auto [finish, error] = run(*s);
    // Counted before the sequence is told: a client that has its last event sees it gone.
    {
      std::lock_guard lock(mutex_);
      active_.reset();
      ++totals_.sequences;
    }
    s->end(std::move(finish), std::move(error));
  }
}

std::pair<std::string, std::string> Scheduler::run(Sequence& s) {
  if (s.cancelled()) return {"cancelled", {}};
  int64_t produced = 0;
  auto note = [&](int64_t n) {
    std::lock_guard lock(mutex_);
    totals_.completion_tokens += n;
    const auto now = Clock::now();
    recent_.emplace_back(now, n);
    while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
  };
  try {
    {
      std::lock_guard lock(mutex_);
      totals_.prompt_tokens += s.prompt_tokens_;
    }
    const Job& j = s.job_;
    models::GenerateStats stats = runner_.generate(
        j.prompt, j.max_tokens,
        [&](int32_t id) {
          s.push(id);
          ++produced;
          note(1);
        },
        j.stop_at_end, 0, &s.cancelled_, &j.sampling);
    const std::string& why = stats.stop;
    return {why == "end of sequence" ? "stop" : why == "interrupted" ? "cancelled" : "length", {}};
  } catch (const std::exception& e) {
    log(LogLevel::error, std::string("serve: a sequence failed: ") + e.what());
    return {"error", e.what()};
  }
}

}  // namespace iron::serve
