// The serving engine (include/iron/models/engine.hpp).
#include "iron/models/engine.hpp"

#include <algorithm>
#include <span>

#include "iron/log.hpp"

namespace iron::models {

using Clock = std::chrono::steady_clock;

namespace {
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string message(const std::exception_ptr& failure) {
  if (!failure) return {};
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown failure";
  }
}

// How a sequence ended, as the request's reader is told (finish) and as LlamaRunner::generate
// words it (stats().stop).
struct Ending {
  std::string finish, stop;
};
const Ending kEndToken{"stop", "end of sequence"}, kStopString{"stop", "stop string"},
    kTokenLimit{"length", "token limit"}, kContextFull{"length", "context full"},
    kCancelled{"cancelled", "interrupted"};
}  // namespace

bool Stream::take(std::string& text, std::vector<int32_t>* ids, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return done_ || !pending_ids_.empty() || !pending_text_.empty(); });
  if (ids) ids->insert(ids->end(), pending_ids_.begin(), pending_ids_.end());
  pending_ids_.clear();
  text += pending_text_;
  pending_text_.clear();
  return !done_;
}

bool Stream::over() const {
  std::lock_guard lock(mutex_);
  return done_;
}

std::string Stream::finish() const {
  std::lock_guard lock(mutex_);
  return finish_;
}

std::string Stream::error() const { return message(failure()); }

std::exception_ptr Stream::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

int64_t Stream::reused_tokens() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

GenerateStats Stream::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Stream::notify() {
  changed_.notify_all();
  if (request_.on_news) request_.on_news();
}

bool Stream::push(int32_t id, const text::Tokenizer* tokenizer) {
  std::string piece;
  if (decoder_ && !tokenizer->is_end(id)) piece = decoder_->push(id);
  if (filter_ && !piece.empty()) {
    piece = filter_->push(piece);
    stopped_by_string_ = filter_->stopped();
  }
  {
    std::lock_guard lock(mutex_);
    pending_ids_.push_back(id);
    pending_text_ += piece;
  }
  notify();
  return !stopped_by_string_;
}

void Stream::end(std::string finish, std::exception_ptr failure) {
  // What the decoder held back (an incomplete character) goes through the filter last; held-back
  // text that can no longer become a stop string is let out.
  std::string tail;
  if (decoder_ && !stopped_by_string_) {
    tail = decoder_->flush();
    if (filter_) {
      tail = filter_->push(tail);
      stopped_by_string_ = filter_->stopped();
      if (stopped_by_string_ && !failure) finish = kStopString.finish;
      tail += filter_->flush();
    }
  }
  {
    std::lock_guard lock(mutex_);
    pending_text_ += tail;
    done_ = true;
    finish_ = std::move(finish);
    failure_ = std::move(failure);
  }
  notify();
}

Engine::Engine(LlamaRunner& runner, int parallel, int queue)
    : runner_(runner), parallel_(parallel), queue_limit_(queue < 0 ? 4 * parallel : queue) {
  if (parallel_ < 1) value_error("Engine: parallel is at least 1, got " + std::to_string(parallel_));
  if (parallel_ > 1 && parallel_ > runner.options().model.slots)
    value_error("Engine: " + std::to_string(parallel_) + " sequences at once need as many cache slots; the runner has " +
                std::to_string(runner.options().model.slots) + " (open it with options.model.slots = " +
                std::to_string(parallel_) + ")");
  slots_.resize(size_t(parallel_));
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& s : queue_) s->cancel();
    for (auto& s : active_) s->cancel();
  }
  wake_.notify_all();
  room_.notify_all();
  thread_.join();
}

std::vector<int32_t> Engine::prompt_ids(const Request& r) const {
  if (const auto* ids = std::get_if<std::vector<int32_t>>(&r.prompt)) {
    // Ids are checked against the vocabulary by the model when their call runs: one outside it
    // ends only its own stream, with the model's error.
    if (ids->empty()) throw RequestError("prompt", "the prompt has no tokens");
    return *ids;
  }
  if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    try {
      return runner_.prompt_ids(*text, false);
    } catch (const Error& e) {
      throw RequestError("prompt", e.what());
    }
  }
  const auto& messages = std::get<std::vector<text::ChatMessage>>(r.prompt);
  if (messages.empty()) throw RequestError("messages", "the chat has no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw RequestError("messages", "message " + std::to_string(i) + ": the role '" + escaped(role, 40) +
                                         "' is not system, user or assistant");
  }
  try {
    const text::Tokenizer& t = runner_.tokenizer();
    return t.encode(t.apply_chat_template(messages, true, text::ChatTemplateFallback::error), false);
  } catch (const Error& e) {
    throw RequestError("messages", std::string("this model's chat cannot be rendered: ") + e.what(),
                       "unsupported_chat_template");
  }
}

std::shared_ptr<Stream> Engine::submit(Request r, bool wait) {
  auto s = std::make_shared<Stream>();
  s->prompt_ = prompt_ids(r);
  const bool chat = std::holds_alternative<std::vector<text::ChatMessage>>(r.prompt);
  const int64_t context = runner_.options().model.context;
  if (int64_t(s->prompt_.size()) >= context)
    throw RequestError(chat ? "messages" : "prompt",
                       "the prompt has " + std::to_string(s->prompt_.size()) + " tokens; the context holds " +
                           std::to_string(context) + " (and one more for the answer)",
                       "context_length_exceeded");
  if (r.max_tokens && *r.max_tokens < 0)
    throw RequestError("max_tokens", "max_tokens is at least 0 (none: until the end of sequence or a full context), got " +
                                         std::to_string(*r.max_tokens));
  for (const std::string& stop : r.stop)
    if (stop.empty()) throw RequestError("stop", "a stop string is empty (it would end every answer at once)");
  try {
    runner_.check_sampling(r.sampling);
  } catch (const Error& e) {
    throw RequestError("sampling", e.what());
  }
  if (runner_.has_tokenizer()) s->decoder_.emplace(runner_.tokenizer(), text::DecodeOptions{.skip_special = r.skip_special});
  if (!r.stop.empty()) s->filter_.emplace(r.stop);
  r.prompt = {};
  s->request_ = std::move(r);
  s->prompt_tokens_ = int64_t(s->prompt_.size());
  s->queued_at_ = Clock::now();
  {
    std::unique_lock lock(mutex_);
    // `parallel` sequences hold slots; the queue holds `queue` more.
    auto full = [&] { return int64_t(queue_.size() + active_.size()) >= int64_t(parallel_) + queue_limit_; };
    if (wait) room_.wait(lock, [&] { return stopping_ || !full(); });
    if (stopping_ || full()) return nullptr;
    queue_.push_back(s);
  }
  wake_.notify_all();
  return s;
}

int64_t Engine::in_flight() const {
  std::lock_guard lock(mutex_);
  return int64_t(queue_.size() + active_.size());
}

void Engine::cancel_all() {
  std::lock_guard lock(mutex_);
  for (auto& s : queue_) s->cancel();
  for (auto& s : active_) s->cancel();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = totals_;
  s.queued = int64_t(queue_.size());
  s.active = int64_t(active_.size());
  const auto now = Clock::now();
  int64_t tokens = 0;
  for (const auto& [when, n] : recent_)
    if (now - when <= std::chrono::seconds(10)) tokens += n;
  s.tokens_per_second = double(tokens) / 10.0;
  return s;
}

void Engine::note(int64_t n) {
  std::lock_guard lock(mutex_);
  totals_.completion_tokens += n;
  const auto now = Clock::now();
  recent_.emplace_back(now, n);
  while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
}

bool Engine::admit(std::vector<std::shared_ptr<Stream>>& joining, size_t free, bool idle) {
  std::unique_lock lock(mutex_);
  if (idle) wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  if (idle && queue_.empty()) return false;  // stopping, nothing left
  while (!queue_.empty() && joining.size() < free) {
    joining.push_back(queue_.front());
    queue_.pop_front();
    active_.push_back(joining.back());
    totals_.prompt_tokens += joining.back()->prompt_tokens_;
  }
  return true;
}

int64_t Engine::reusable(const Slot& slot, const Stream& s) const {
  if (!s.request_.reuse_cache) return 0;
  const std::vector<int32_t>& p = s.prompt_;
  size_t common = 0;
  while (common < slot.held.size() && common < p.size() && slot.held[common] == p[common]) ++common;
  // At least the last prompt token goes in: its call draws the first token.
  return int64_t(std::min(common, p.size() - 1));
}

void Engine::retire(const std::shared_ptr<Stream>& s, const std::string& finish, std::exception_ptr failure,
                    const GenerateStats& stats) {
  {
    std::lock_guard lock(mutex_);
    active_.erase(std::find(active_.begin(), active_.end(), s));
    ++totals_.sequences;
  }
  room_.notify_all();
  {
    std::lock_guard lock(s->mutex_);
    s->stats_ = stats;
  }
  s->end(finish, std::move(failure));
}

void Engine::loop() {
  if (parallel_ > 1) return run_batched();
  for (;;) {
    std::vector<std::shared_ptr<Stream>> joining;
    if (!admit(joining, 1, true)) return;
    run_alone(joining[0]);
  }
}

void Engine::run_alone(const std::shared_ptr<Stream>& s) {
  if (s->cancelled()) return retire(s, kCancelled.finish, nullptr, {});
  Slot& slot = slots_[0];
  const int64_t reused = reusable(slot, *s);
  {
    std::lock_guard lock(s->mutex_);
    s->reused_ = reused;
  }
  const std::vector<int32_t> suffix(s->prompt_.begin() + reused, s->prompt_.end());
  const text::Tokenizer* tokenizer = runner_.has_tokenizer() ? &runner_.tokenizer() : nullptr;
  std::vector<int32_t> answer;
  GenerateStats g;
  // Until it is over, what the slot holds past the prompt's reused part is unknown.
  slot.held.resize(size_t(reused));
  try {
    g = runner_.generate(
        suffix, s->request_.max_tokens.value_or(-1),
        [&](int32_t id) {
          answer.push_back(id);
          note(1);
          // A stop string ends the decode after this token, as a cancel does.
          if (!s->push(id, tokenizer)) s->cancel();
        },
        s->request_.stop_at_end, reused, &s->cancelled_, &s->request_.sampling);
  } catch (const std::exception& e) {
    log(LogLevel::error, std::string("engine: a sequence failed: ") + e.what());
    slot.held.clear();
    return retire(s, "error", std::current_exception(), {});
  }
  // The cache holds the prompt and every token but the last (drawn, never fed back).
  slot.held = s->prompt_;
  if (!answer.empty()) slot.held.insert(slot.held.end(), answer.begin(), answer.end() - 1);
  Ending how = g.stop == kEndToken.stop ? kEndToken : g.stop == kContextFull.stop ? kContextFull
             : g.stop == kTokenLimit.stop ? kTokenLimit : kCancelled;
  if (s->stopped_by_string_) how = kStopString;
  g.stop = how.stop;
  retire(s, how.finish, nullptr, g);
}

void Engine::run_batched() {
  BatchDecoder& batch = runner_.batch();
  const int64_t context = runner_.options().model.context;
  const text::Tokenizer* tokenizer = runner_.has_tokenizer() ? &runner_.tokenizer() : nullptr;
  // A sequence in the batch: its slot, the ids it generated, the position its last token takes,
  // and while its prompt goes in, how much of what the slot did not hold is in (fed < the rest's
  // length). Its settings' row is made here, once.
  struct Row {
    std::shared_ptr<Stream> seq;
    int64_t slot = 0, position = 0, reused = 0, fed = 0;
    std::vector<int32_t> answer;
    SamplingRow sampling;
    Clock::time_point joined, first;
    std::span<const int32_t> rest() const { return std::span(seq->prompt_).subspan(size_t(reused)); }
    bool prefilling() const { return fed < int64_t(rest().size()); }
    int64_t produced() const { return int64_t(answer.size()); }
  };
  std::vector<Row> rows;
  std::vector<int64_t> free_slots;
  for (int64_t slot = parallel_ - 1; slot >= 0; --slot) free_slots.push_back(slot);
  // Whether row r is over after its latest token, and how.
  auto ended = [&](const Row& r) -> std::optional<Ending> {
    const Request& q = r.seq->request_;
    if (q.stop_at_end && tokenizer && tokenizer->is_end(r.answer.back())) return kEndToken;
    if (r.seq->cancelled()) return kCancelled;
    if (q.max_tokens && r.produced() >= *q.max_tokens) return kTokenLimit;
    if (r.position + 1 >= context) return kContextFull;
    return std::nullopt;
  };
  auto leave = [&](size_t i, const Ending& how, std::exception_ptr failure) {
    Row& r = rows[i];
    // What the slot holds from position 0: the prompt, then each generated token fed back (all
    // but the last); nothing known after a failed call.
    std::vector<int32_t>& held = slots_[size_t(r.slot)].held;
    held = r.seq->prompt_;
    held.insert(held.end(), r.answer.begin(), r.answer.end());
    held.resize(failure ? 0 : size_t(r.prefilling() ? r.reused + r.fed : r.position));
    const auto now = Clock::now();
    GenerateStats g;
    g.prompt_tokens = int64_t(r.rest().size());
    g.generated_tokens = r.produced();
    if (r.produced() > 0) {
      g.prompt_seconds = seconds_between(r.joined, r.first);
      g.generate_seconds = seconds_between(r.first, now);
    }
    g.stop = how.stop;
    const std::shared_ptr<Stream> s = r.seq;
    free_slots.push_back(r.slot);
    rows.erase(rows.begin() + int64_t(i));
    const std::string finish = failure ? "error" : how.finish;
    retire(s, finish, std::move(failure), g);
  };
  for (;;) {
    std::vector<std::shared_ptr<Stream>> joining;  // as many as there are free slots
    if (!admit(joining, free_slots.size(), rows.empty())) return;
    for (auto& s : joining) {
      // The free slot that holds most of this prompt (any, when it does not reuse the cache).
      auto best = free_slots.end() - 1;
      for (auto it = free_slots.begin(); it != free_slots.end(); ++it)
        if (reusable(slots_[size_t(*it)], *s) > reusable(slots_[size_t(*best)], *s)) best = it;
      const int64_t reused = reusable(slots_[size_t(*best)], *s);
      {
        std::lock_guard lock(s->mutex_);
        s->reused_ = reused;
      }
      rows.push_back({s, *best, 0, reused, 0, {}, s->request_.sampling, Clock::now(), {}});
      free_slots.erase(best);
    }
    // Cancelled rows, and those asking for no tokens, leave before the step, not after it.
    for (size_t i = rows.size(); i-- > 0;) {
      if (rows[i].seq->cancelled()) leave(i, kCancelled, nullptr);
      else if (rows[i].seq->request_.max_tokens == 0) leave(i, kTokenLimit, nullptr);
    }
    // One call steps every decoding row and takes the next part of as many prompts as fit beside
    // them (BatchDecoder::prefill_parts, the oldest prompt first; a decoding row is a prompt of
    // its one last token): prompts that arrive together are prefilled together, and in the
    // decode step's own call, which reads the weights once for both. Prompts that did not fit
    // (the rows already full) take a call of their own after it, so every prompt moves on each
    // pass. A sequence joins the decoding rows at the call after its last part.
    std::vector<size_t> place;  // each call's row: rows[place[k]]
    std::vector<BatchDecoder::Prompt> calls;
    size_t decoding = 0;
    for (size_t i = 0; i < rows.size(); ++i)
      if (!rows[i].prefilling()) {
        const Row& r = rows[i];
        place.push_back(i);
        calls.push_back({r.slot, r.position, std::span(&r.answer.back(), 1), 0, r.sampling, r.produced()});
        ++decoding;
      }
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].prefilling()) {
        const Row& r = rows[i];
        place.push_back(i);
        calls.push_back({r.slot, r.reused, r.rest(), r.fed, r.sampling, 0});
      }
    if (calls.empty()) continue;
    const std::vector<BatchDecoder::Prompt> before = calls;
    std::vector<std::optional<int32_t>> drawn(calls.size());
    std::vector<std::exception_ptr> failed(calls.size());
    // Runs calls [from, to) in one call (the first `always` of them whatever their rows); on an
    // error, says it for every one of them.
    auto run = [&](size_t from, size_t to, size_t always) {
      std::vector<BatchDecoder::Prompt> part(calls.begin() + int64_t(from), calls.begin() + int64_t(to));
      try {
        const std::vector<std::optional<int32_t>> got = batch.prefill_parts(part, always);
        for (size_t k = from; k < to; ++k) {
          calls[k].at = part[k - from].at;
          drawn[k] = got[k - from];
        }
      } catch (...) {
        for (size_t k = from; k < to; ++k) failed[k] = std::current_exception();
      }
    };
    // Runs calls [from, to) as run() does; if that fails, finds which failed: the decoding rows
    // among them in one call, then each prompt alone, so a failing prompt ends only its own
    // sequence (a part the failed call wrote is written again, the same ids at the same places).
    auto run_or_find = [&](size_t from, size_t to, size_t always) {
      run(from, to, always);
      if (!failed[from]) return;
      log(LogLevel::error, "engine: a call failed: " + message(failed[from]));
      for (size_t k = from; k < to; ++k) {
        calls[k] = before[k];
        failed[k] = nullptr;
      }
      if (from < decoding) run(from, decoding, decoding - from);
      for (size_t k = std::max(from, decoding); k < to; ++k) run(k, k + 1, 1);
    };
    run_or_find(0, calls.size(), std::max<size_t>(decoding, 1));
    bool taken = false;
    for (size_t k = decoding; k < calls.size(); ++k) taken = taken || calls[k].at > before[k].at || failed[k];
    if (calls.size() > decoding && !taken) run_or_find(decoding, calls.size(), 1);
    // What each row got, the last rows first (a row that leaves shifts those after it).
    std::vector<size_t> order(calls.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return place[a] > place[b]; });
    int64_t produced = 0;
    for (size_t k : order) {
      const size_t i = place[k];
      Row& row = rows[i];
      if (failed[k]) {
        log(LogLevel::error, std::string("engine: ") + (k < decoding ? "a decode step" : "a sequence") +
                                 " failed: " + message(failed[k]));
        leave(i, kCancelled, failed[k]);
        continue;
      }
      if (k < decoding) {
        ++row.position;
      } else {
        row.fed = calls[k].at;
        if (!drawn[k]) continue;
        row.position = int64_t(row.seq->prompt_.size());
        row.first = Clock::now();
      }
      row.answer.push_back(*drawn[k]);
      ++produced;
      if (!row.seq->push(row.answer.back(), tokenizer)) leave(i, kStopString, nullptr);
      else if (auto how = ended(row)) leave(i, *how, nullptr);
    }
    note(produced);
  }
}

}  // namespace iron::models
