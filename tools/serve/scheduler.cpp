#include "serve/scheduler.hpp"

#include <algorithm>
#include <optional>
#include <span>

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
    // One call steps every decoding row and takes the next part of as many prompts as fit beside
    // them (BatchDecoder::prefill_parts, the oldest prompt first; a decoding row is a prompt of
    // its one last token): prompts that arrive together are prefilled together, and in the
    // decode step's own call, which reads the weights once for both. Prompts that did not fit
    // (the rows already full) take a call of their own after it, so every prompt moves on each
    // pass. A sequence joins the decoding rows at the call after its last part.
    std::vector<size_t> place;  // each call's row: rows[place[k]]
    std::vector<models::BatchDecoder::Prompt> calls;
    size_t decoding = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      if (!rows[i].prefilling()) {
        const Row& r = rows[i];
        place.push_back(i);
        calls.push_back({r.slot, r.position, std::span(&r.last, 1), 0, r.seq->job_.sampling, r.produced});
        ++decoding;
      }
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].prefilling()) {
        const Job& j = rows[i].seq->job_;
        place.push_back(i);
        calls.push_back({rows[i].slot, 0, j.prompt, rows[i].fed, j.sampling, 0});
      }
    if (calls.empty()) continue;
    const std::vector<models::BatchDecoder::Prompt> before = calls;
    std::vector<std::optional<int32_t>> drawn(calls.size());
    std::vector<std::string> failed(calls.size());
    // Runs calls [from, to) in one call (the first `always` of them whatever their rows); on an
    // error, says it for every one of them.
    auto run = [&](size_t from, size_t to, size_t always) {
      std::vector<models::BatchDecoder::Prompt> part(calls.begin() + int64_t(from), calls.begin() + int64_t(to));
      try {
        const std::vector<std::optional<int32_t>> got = batch.prefill_parts(part, always);
        for (size_t k = from; k < to; ++k) {
          calls[k].at = part[k - from].at;
          drawn[k] = got[k - from];
        }
      } catch (const std::exception& e) {
        for (size_t k = from; k < to; ++k) failed[k] = e.what();
      }
    };
    // Runs calls [from, to) as run() does; if that fails, finds which failed: the decoding rows
    // among them in one call, then each prompt alone, so a failing prompt ends only its own
    // sequence (a part the failed call wrote is written again, the same ids at the same places).
    auto run_or_find = [&](size_t from, size_t to, size_t always) {
      run(from, to, always);
      if (failed[from].empty()) return;
      log(LogLevel::error, "serve: a call failed: " + failed[from]);
      for (size_t k = from; k < to; ++k) {
        calls[k] = before[k];
        failed[k].clear();
      }
      if (from < decoding) run(from, decoding, decoding - from);
      for (size_t k = std::max(from, decoding); k < to; ++k) run(k, k + 1, 1);
    };
    run_or_find(0, calls.size(), std::max<size_t>(decoding, 1));
    bool taken = false;
    for (size_t k = decoding; k < calls.size(); ++k) taken = taken || calls[k].at > before[k].at || !failed[k].empty();
    if (calls.size() > decoding && !taken) run_or_find(decoding, calls.size(), 1);
    // What each row got, the last rows first (a row that leaves shifts those after it).
    std::vector<size_t> order(calls.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return place[a] > place[b]; });
    int64_t produced = 0;
    for (size_t k : order) {
      const size_t i = place[k];
      Row& row = rows[i];
      if (!failed[k].empty()) {
        log(LogLevel::error, std::string("serve: ") + (k < decoding ? "a decode step" : "a sequence") +
                                 " failed: " + failed[k]);
        leave(i, "error", failed[k]);
        continue;
      }
      if (k < decoding) {
        row.last = *drawn[k];
        ++row.produced;
        ++row.position;
      } else {
        row.fed = calls[k].at;
        if (!drawn[k]) continue;
        row.last = *drawn[k];
        row.produced = 1;
        row.position = int64_t(row.seq->job_.prompt.size());
      }
      row.seq->push(row.last);
      ++produced;
      if (auto finish = ended(row)) leave(i, *finish, {});
    }
    note(produced);
  }
}

}  // namespace iron::serve
