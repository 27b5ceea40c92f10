#include "serve/scheduler.hpp"

#include <algorithm>
#include <optional>

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
    for (auto& s : active_) s->cancel();
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
    // `parallel` sequences hold slots; the queue holds `queue` more.
    if (stopping_ || int64_t(queue_.size() + active_.size()) >= int64_t(parallel_) + queue_limit_) return nullptr;
    queue_.push_back(s);
  }
  wake_.notify_all();
  return s;
}

int64_t Scheduler::in_flight() const {
  std::lock_guard lock(mutex_);
  return int64_t(queue_.size() + active_.size());
}

void Scheduler::cancel_all() {
  std::lock_guard lock(mutex_);
  for (auto& s : queue_) s->cancel();
  for (auto& s : active_) s->cancel();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = totals_;
  s.queued = int64_t(queue_.size());
  s.active = int64_t(active_.size());
  const auto now = Clock::now();
  int64_t tokens = 0;
  for (const auto& [when, n] : recent_)
    if (now - when <= std::chrono::seconds(10)) tokens += n;
  s.tokens_per_second = double(tokens) / 10.0;
  return s;
}

void Scheduler::note(int64_t n) {
  std::lock_guard lock(mutex_);
  totals_.completion_tokens += n;
  const auto now = Clock::now();
  recent_.emplace_back(now, n);
  while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
}

// Every active sequence stepped in one call.
void Scheduler::loop() {
  models::BatchDecoder& batch = runner_.batch();
  const int64_t context = runner_.options().model.context;
  // A sequence in the batch: its slot, its tokens so far, the position its last token takes,
  // and while its prompt goes in, how much of it is in (fed < the prompt's length).
  struct Row {
    std::shared_ptr<Sequence> seq;
    int64_t slot = 0, produced = 0, position = 0, fed = 0;
    int32_t last = 0;
    bool prefilling() const { return fed < int64_t(seq->job_.prompt.size()); }
  };
  std::vector<Row> rows;
  std::vector<int64_t> free_slots;
  for (int64_t slot = parallel_ - 1; slot >= 0; --slot) free_slots.push_back(slot);
  // Whether row r is over after its latest token, and how.
  auto ended = [&](const Row& r) -> std::optional<std::string> {
    const Job& j = r.seq->job_;
    if (j.stop_at_end && runner_.has_tokenizer() && runner_.tokenizer().is_end(r.last)) return "stop";
    if (r.seq->cancelled()) return "cancelled";
    if ((j.max_tokens >= 0 && r.produced >= j.max_tokens) || r.position + 1 >= context) return "length";
    return std::nullopt;
  };
  auto leave = [&](size_t i, std::string finish, std::string error) {
    std::shared_ptr<Sequence> s = rows[i].seq;
    free_slots.push_back(rows[i].slot);
    rows.erase(rows.begin() + int64_t(i));
    {
      std::lock_guard lock(mutex_);
      active_.erase(std::find(active_.begin(), active_.end(), s));
      ++totals_.sequences;
    }
    s->end(std::move(finish), std::move(error));
  };
  for (;;) {
    std::vector<std::shared_ptr<Sequence>> joining;  // as many as there are free slots
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !rows.empty(); });
      if (queue_.empty() && rows.empty()) return;  // stopping, nothing left
      while (!queue_.empty() && joining.size() < free_slots.size()) {
        joining.push_back(queue_.front());
        queue_.pop_front();
        active_.push_back(joining.back());
        totals_.prompt_tokens += joining.back()->prompt_tokens_;
      }
    }
    for (auto& s : joining) {
      rows.push_back({s, free_slots.back(), 0, 0, 0, 0});
      free_slots.pop_back();
    }
    // Cancelled rows leave before the step, not after it.
    for (size_t i = rows.size(); i-- > 0;)
      if (rows[i].seq->cancelled()) leave(i, "cancelled", {});
    // One prefill call between two decode steps, taking the next chunk of as many prompts as
    // share it (the oldest first; BatchDecoder::prefill_parts): sequences that arrive together
    // are prefilled together, and each joins the batch at the step after its last chunk.
    std::vector<size_t> feeding;
    std::vector<models::BatchDecoder::Prompt> prompts;
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].prefilling()) {
        const Job& j = rows[i].seq->job_;
        feeding.push_back(i);
        prompts.push_back({rows[i].slot, 0, j.prompt, rows[i].fed, j.sampling, 0});
      }
    if (!feeding.empty()) {
      std::vector<std::optional<int32_t>> first(feeding.size());
      std::vector<std::string> failed(feeding.size());
      try {
        first = batch.prefill_parts(prompts);
      } catch (const std::exception& e) {
        // Which prompt failed: each alone, so only its own sequence ends (a part the shared call
        // wrote before failing is written again, the same ids at the same places).
        log(LogLevel::error, std::string("serve: a prefill failed: ") + e.what());
        for (size_t k = 0; k < feeding.size(); ++k) {
          try {
            first[k] = batch.prefill_parts(std::span(&prompts[k], 1))[0];
          } catch (const std::exception& alone) {
            failed[k] = alone.what();
          }
        }
      }
      for (size_t k = feeding.size(); k-- > 0;) {
        Row& row = rows[feeding[k]];
        if (!failed[k].empty()) {
          log(LogLevel::error, "serve: a sequence failed: " + failed[k]);
          leave(feeding[k], "error", failed[k]);
          continue;
        }
        row.fed = prompts[k].at;
        if (!first[k]) continue;
        row.last = *first[k];
        row.produced = 1;
        row.position = int64_t(row.seq->job_.prompt.size());
        row.seq->push(row.last);
        note(1);
        if (auto finish = ended(row)) leave(feeding[k], *finish, {});
      }
    }
    std::vector<size_t> decoding;
    for (size_t i = 0; i < rows.size(); ++i)
      if (!rows[i].prefilling()) decoding.push_back(i);
    if (decoding.empty()) continue;
    std::vector<models::BatchDecoder::Row> step;
    for (size_t i : decoding) {
      const Row& r = rows[i];
      step.push_back({r.slot, r.position, r.last, r.produced, r.seq->job_.sampling});
    }
    std::vector<int32_t> next;
    try {
      next = batch.step(step);
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("serve: a decode step failed: ") + e.what());
      for (size_t k = decoding.size(); k-- > 0;) leave(decoding[k], "error", e.what());
      continue;
    }
    note(int64_t(next.size()));
    for (size_t k = 0; k < decoding.size(); ++k) {
      Row& r = rows[decoding[k]];
      r.last = next[k];
      ++r.produced;
      ++r.position;
      r.seq->push(next[k]);
    }
    for (size_t k = decoding.size(); k-- > 0;)
      if (auto finish = ended(rows[decoding[k]])) leave(decoding[k], *finish, {});
  }
}

}  // namespace iron::serve
