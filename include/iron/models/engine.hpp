// The serving engine: requests from any number of threads, each answered as a stream of tokens
// and text while it is generated, over one loaded model (LlamaRunner). What `iron serve`,
// `iron chat`, `iron generate` and Python's iron.Engine all run.
//
// A thread of the engine's own owns the model. Requests are queued (bounded: submit() refuses, or
// waits, when the queue is full) and served in order. With one slot (parallel 1) a request runs
// as LlamaRunner::generate runs it: its decode steps chained on the device, up to the runner's
// `depth` ahead of the host. With several, up to `parallel` sequences decode together
// (continuous batching, BatchDecoder): each in a cache slot of its own, new prompts prefilled a
// part at a time in the decode step's call where they fit beside its rows (else in a call of
// their own after it), each joining the batch at the next call; a finished or cancelled one
// leaves at once, and a call that fails ends only the sequences it was found to fail for.
//
// Every stream's text is decoded and filtered on the engine's thread: whole UTF-8 characters,
// the end-of-sequence token's text dropped, and stop strings cut (StopFilter: no text of a stop
// string, not even its start, is handed over; meeting one ends the sequence at once).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "iron/error.hpp"
#include "iron/models/runner.hpp"
#include "iron/models/stop.hpp"
#include "iron/sampling.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::models {

/// What a request asks for.
struct Request {
  /// The prompt: token ids as they are; a text, tokenised as `iron generate -p` does (BOS first
  /// when the model adds one; an empty text is BOS alone); or chat messages (roles system, user,
  /// assistant), rendered by the model's chat template with the assistant's turn opened (a
  /// template this library cannot render is a value error, not a guess).
  std::variant<std::vector<int32_t>, std::string, std::vector<text::ChatMessage>> prompt;
  Sampling sampling;
  /// Tokens to generate at most (>= 0); none: until the end of sequence or a full context.
  std::optional<int64_t> max_tokens;
  /// The text ends before the first of these (none empty); meeting one ends the sequence.
  std::vector<std::string> stop;
  /// Whether the end-of-sequence token ends it (off: max_tokens or a full context do).
  bool stop_at_end = true;
  /// Drop control tokens' text (BOS, <|im_end|>) from the text (the end token's always is).
  bool skip_special = false;
  /// Whether the cache slot may already hold the start of this prompt from the slot's last
  /// sequence (a conversation's earlier turns): then only the rest is prefilled. Off, the whole
  /// prompt is, so a request's tokens do not depend on what ran before it (a prefix computed in
  /// other calls may round differently: at highest precision, calls of more than 8 rows).
  bool reuse_cache = false;
  /// Called on the engine's thread whenever the stream has news (tokens, its end): a wake-up for
  /// a reader that waits elsewhere than in Stream::take (an event loop). It must be quick and
  /// must not call into the engine.
  std::function<void()> on_news;
};

/// A request submit() refuses (a value error): which of its fields, and for the two refusals a
/// server answers with a code of their own, that code ("context_length_exceeded",
/// "unsupported_chat_template").
class RequestError : public Error {
 public:
  RequestError(std::string field, const std::string& message, std::string code = {})
      : Error(ErrorKind::value, message), field_(std::move(field)), code_(std::move(code)) {}
  /// "prompt", "messages", "sampling", "max_tokens" or "stop".
  const std::string& field() const { return field_; }
  const std::string& code() const { return code_; }

 private:
  std::string field_, code_;
};

/// One request's tokens and text, from the engine's thread to the reader's.
class Stream {
 public:
  /// Waits up to `timeout` for news, then takes everything produced since the last take: text
  /// appended to `text`, token ids (the end token and those past a stop string included) to
  /// `ids` when given. Returns false once the stream is over and all of it taken (then finish()
  /// and error() say how), true while more may come.
  bool take(std::string& text, std::vector<int32_t>* ids, std::chrono::milliseconds timeout);
  /// Asks the engine to stop this sequence (a client gone): it leaves after the token being
  /// produced, or before it starts when still queued; its slot is free at once.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  /// Whether the engine is done with it (what is left may still be waiting to be taken).
  bool over() const;
  /// How it ended: "stop" (the end token or a stop string), "length" (max_tokens or a full
  /// context), "cancelled", or "error" (error() says what failed); empty until it is over.
  std::string finish() const;
  std::string error() const;
  /// What failed, to rethrow with its own type (an iron::Error's kind kept); null unless it did.
  std::exception_ptr failure() const;
  int64_t prompt_tokens() const { return prompt_tokens_; }
  /// Prompt tokens the cache already held (Request::reuse_cache); known once it started.
  int64_t reused_tokens() const;
  /// The prompt's and the generation's counts and times; `stop` as LlamaRunner::generate says it
  /// ("end of sequence", "token limit", "context full", "interrupted"; "stop string" too).
  GenerateStats stats() const;
  std::chrono::steady_clock::time_point queued_at() const { return queued_at_; }

 private:
  friend class Engine;
  // On the engine's thread: a token, decoded and filtered; returns false when a stop string
  // ended the text (the sequence is over).
  bool push(int32_t id, const text::Tokenizer* tokenizer);
  void end(std::string finish, std::exception_ptr failure);
  void notify();

  std::vector<int32_t> prompt_;
  Request request_;  // the rest of it (its prompt's ids in prompt_)
  int64_t prompt_tokens_ = 0;
  std::chrono::steady_clock::time_point queued_at_;
  std::atomic<bool> cancelled_{false};
  // The engine thread's own: the text decoder and the stop strings' filter.
  std::optional<text::StreamDecoder> decoder_;
  std::optional<StopFilter> filter_;
  bool stopped_by_string_ = false;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int32_t> pending_ids_;
  std::string pending_text_;
  bool done_ = false;
  std::string finish_;
  std::exception_ptr failure_;
  int64_t reused_ = 0;
  GenerateStats stats_;
};

/// Counters for a server's /metrics.
struct EngineStats {
  int64_t queued = 0, active = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // totals
  int64_t sequences = 0;                             // finished, any way
  double tokens_per_second = 0;                      // generated over the last 10 s
};

class Engine {
 public:
  /// Over `runner` (which it then owns the use of: nothing else may call it while the engine
  /// lives): `parallel` sequences at once, each in a cache slot of its own (the runner opened with
  /// options.model.slots >= parallel), and `queue` requests waiting beyond them (-1: 4 x parallel).
  Engine(LlamaRunner& runner, int parallel = 1, int queue = -1);
  /// Cancels every sequence, queued or decoding, and waits for the engine's thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Checks and queues a request: its prompt rendered and tokenised here, on the caller's thread.
  /// A value error for a request that cannot run (an unknown role, a negative max_tokens,
  /// sampling settings out of range or that the device cannot draw, an empty stop string, a
  /// prompt the context cannot hold with room for one token). When the queue is full: null, or
  /// with `wait`, waits until a place frees. Null too once the engine is stopping.
  std::shared_ptr<Stream> submit(Request request, bool wait = false);
  /// The prompt's token ids as submit() makes them.
  std::vector<int32_t> prompt_ids(const Request& request) const;

  /// Sequences queued or decoding.
  int64_t in_flight() const;
  /// Cancels every sequence, queued or decoding (a shutdown past its grace).
  void cancel_all();
  EngineStats stats() const;
  LlamaRunner& runner() const { return runner_; }
  int parallel() const { return parallel_; }

 private:
  /// A cache slot's contents: the ids whose keys and values it holds from position 0.
  struct Slot {
    std::vector<int32_t> held;
  };
  void loop();
  /// parallel 1: each sequence in turn, through LlamaRunner::generate.
  void run_alone(const std::shared_ptr<Stream>& s);
  /// parallel > 1: every active sequence stepped in one call.
  void run_batched();
  /// Moves up to `free` queued sequences to the active ones, into `joining`. When `idle` (nothing
  /// decoding), first waits for one; false when the engine is stopping and none is left.
  bool admit(std::vector<std::shared_ptr<Stream>>& joining, size_t free, bool idle);
  /// The prompt tokens `slot` holds for `s` (0 unless it asked to reuse the cache).
  int64_t reusable(const Slot& slot, const Stream& s) const;
  /// The sequence is over: the counters moved, a waiting submit() woken, its stream told.
  void retire(const std::shared_ptr<Stream>& s, const std::string& finish, std::exception_ptr failure,
              const GenerateStats& stats);
  /// Counts `n` generated tokens for /metrics.
  void note(int64_t n);

  LlamaRunner& runner_;
  int parallel_, queue_limit_;
  std::vector<Slot> slots_;  // the engine thread's
  mutable std::mutex mutex_;
  std::condition_variable wake_, room_;
  std::deque<std::shared_ptr<Stream>> queue_;
  std::vector<std::shared_ptr<Stream>> active_;
  bool stopping_ = false;
  EngineStats totals_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (when, tokens)
  std::thread thread_;
};

}  // namespace iron::models
