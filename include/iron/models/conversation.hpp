// A conversation with a model that keeps its KV cache between turns: each turn renders the whole
// conversation with the model's chat template and prefills only what the cache does not hold
// yet. The assistant's own answers are rendered from the ids it generated, so the cache and the
// rendering agree token for token. Each turn is a request to an Engine that may reuse its slot's
// cache (Request::reuse_cache). What `iron chat` is built on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "iron/models/engine.hpp"

namespace iron::models {

struct ConversationMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  std::vector<int32_t> ids;  // an assistant message: the ids it was generated as (else empty)
};

/// Reads the messages of a conversation Conversation::to_json() wrote, checking them as the
/// untrusted input they are: roles, texts, and ids within a vocabulary of `vocab`; a value error
/// names the message and what is wrong.
std::vector<ConversationMessage> conversation_from_json(const nlohmann::json& conversation, int64_t vocab);

/// What one turn did.
struct TurnStats {
  int64_t prefilled = 0;        // tokens this turn prefilled (those the cache did not hold)
  int64_t cached = 0;           // tokens in the cache after the turn
  int64_t generated = 0;        // tokens of the answer
  double answer_seconds = 0;    // from the end of the prefill to the last token
  int64_t dropped_messages = 0; // oldest messages dropped so the turn fits the context
  std::string stop;             // as GenerateStats::stop
};

/// A turn's settings.
struct TurnOptions {
  /// Tokens of the answer at most; < 0: until the model ends its turn or the context is full.
  int64_t max_tokens = -1;
  /// How the answer is sampled; none: with the runner's settings (its options().model.sampling).
  std::optional<Sampling> sampling;
  /// As Request::on_news: a wake-up for a reader that waits elsewhere than in Stream::take.
  std::function<void()> on_news;
};

class Conversation {
 public:
  /// Over `engine` (best with one slot: a turn's cache is found again when no other sequence
  /// took its slot meanwhile); `system`: a system message first (none when empty). Turns sample
  /// with the runner's settings (its options().model.sampling).
  explicit Conversation(Engine& engine, const std::string& system = {});
  /// Cancels a turn still in progress.
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  /// Adds the user's message and answers it, handing the answer's text to `on_text` piece by
  /// piece as it is generated (whole UTF-8 characters; the end-of-turn token not written).
  /// `max_tokens` < 0: until the model ends its turn or the context is full. An interrupted
  /// answer stays in the conversation as far as it got. When the conversation and room for an
  /// answer do not fit the context, the oldest messages after the system message are dropped
  /// (TurnStats::dropped_messages) and the cache rebuilt; a value error when the new message
  /// alone does not fit.
  TurnStats reply(const std::string& user, int64_t max_tokens, const std::function<void(const std::string&)>& on_text,
                  const std::atomic<bool>* interrupt = nullptr);

  /// reply() in two halves, for a reader that takes the answer's stream itself (on another
  /// thread, or woken by an event loop through `options.on_news`): adds the user's message
  /// (dropping the oldest ones as reply() does) and submits the answer's request, waiting for a
  /// place in the engine's queue with `wait`, else returning null when it is full (then nothing
  /// changed). The caller takes the stream's text with its ids, cancels it if it wants, and hands
  /// the ids to end_turn(). A value error while a turn is in progress, or when the engine is
  /// stopping; a request the engine refuses leaves the conversation as it was.
  std::shared_ptr<Stream> begin_turn(const std::string& user, const TurnOptions& options, bool wait = true);
  /// Ends the turn begun: `answer` the ids taken from its stream so far; what is left is taken
  /// here (its text dropped), waiting for the stream's end. The answer joins the conversation as
  /// far as it got; a failed stream's error is rethrown (the user's message stays, unanswered).
  TurnStats end_turn(std::vector<int32_t> answer);
  /// Whether a turn was begun and not ended.
  bool in_turn() const { return turn_ != nullptr; }

  /// A new conversation (the system message kept) and an empty cache. These three are value
  /// errors while a turn is in progress (its answer would land in another conversation).
  void clear();
  /// Sets (or, empty, removes) the system message; the rest of the conversation stays.
  void set_system(const std::string& system);

  const std::vector<ConversationMessage>& messages() const { return messages_; }
  /// Tokens the cache holds for this conversation.
  int64_t cached_tokens() const { return cached_; }

  /// The conversation as JSON: {"messages": [{"role", "content", "ids"?}, ...]}, the OpenAI
  /// shape plus each assistant message's ids.
  nlohmann::json to_json() const;
  /// Replaces the conversation with one from to_json() (untrusted: roles, texts and ids are
  /// checked, a value error names what is wrong); the next turn prefills it whole.
  void load_json(const nlohmann::json& conversation);

 private:
  /// The ids of a whole conversation, and with `generation_prompt` the start of the
  /// assistant's turn.
  std::vector<int32_t> render(const std::vector<ConversationMessage>& messages, bool generation_prompt) const;
  void refuse_in_turn(const char* what) const;

  // A turn begun and not ended: its stream, its prompt's length and the messages it dropped.
  struct Turn {
    std::shared_ptr<Stream> stream;
    int64_t prompt = 0, dropped = 0;
  };

  Engine& engine_;
  LlamaRunner& runner_;
  std::vector<ConversationMessage> messages_;
  int64_t cached_ = 0;  // the tokens of this conversation the cache holds, from position 0
  bool fresh_ = true;   // the next turn prefills the whole conversation (nothing in the cache is its)
  std::unique_ptr<Turn> turn_;
};

}  // namespace iron::models
