// Conversations that keep their cache (include/iron/models/conversation.hpp).
#include "iron/models/conversation.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "iron/error.hpp"

namespace iron::models {

namespace {
std::vector<text::ChatMessage> chat_messages(const std::vector<ConversationMessage>& messages, size_t count) {
  std::vector<text::ChatMessage> out;
  for (size_t i = 0; i < count; ++i) out.push_back({messages[i].role, messages[i].content});
  return out;
}
}  // namespace

Conversation::Conversation(Engine& engine, const std::string& system) : engine_(engine), runner_(engine.runner()) {
  runner_.tokenizer();  // a clear error for a model without one
  set_system(system);
}

void Conversation::set_system(const std::string& system) {
  refuse_in_turn("change the system message");
  if (!messages_.empty() && messages_[0].role == "system") messages_.erase(messages_.begin());
  if (!system.empty()) messages_.insert(messages_.begin(), {"system", system, {}});
}

void Conversation::clear() {
  refuse_in_turn("clear the conversation");
  std::erase_if(messages_, [](const ConversationMessage& m) { return m.role != "system"; });
  cached_ = 0;
  fresh_ = true;
}

// Each message's turn is the text the template adds for it (the rendering of the messages up to
// it minus that of those before it). The text is encoded in runs as long as possible (a single
// turn encodes as one text, as generate --chat's prompt does); an assistant's turn is cut around
// its own ids, so a reply the model generated renders exactly as the cache holds it.
std::vector<int32_t> Conversation::render(const std::vector<ConversationMessage>& messages,
                                          bool generation_prompt) const {
  const text::Tokenizer& t = runner_.tokenizer();
  const auto fallback = text::ChatTemplateFallback::chatml;
  auto rendered = [&](size_t count, bool prompt) {
    return t.apply_chat_template(chat_messages(messages, count), prompt, fallback);
  };
  std::vector<int32_t> ids;
  std::string pending;  // text not encoded yet
  auto flush = [&] {
    const std::vector<int32_t> more = t.encode(pending, false);
    ids.insert(ids.end(), more.begin(), more.end());
    pending.clear();
  };
  std::string before = rendered(0, false);
  pending = before;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string upto = rendered(i + 1, false);
    if (upto.compare(0, before.size(), before) != 0)
      value_error("chat template: a message changed how earlier ones render; cannot keep the cache");
    const std::string turn = upto.substr(before.size());
    const ConversationMessage& m = messages[i];
    const size_t at = m.ids.empty() || m.content.empty() ? std::string::npos : turn.rfind(m.content);
    if (at == std::string::npos) {
      pending += turn;
    } else {
      pending += turn.substr(0, at);
      flush();
      ids.insert(ids.end(), m.ids.begin(), m.ids.end());
      pending = turn.substr(at + m.content.size());
    }
    before = upto;
  }
  if (generation_prompt) pending += rendered(messages.size(), true).substr(before.size());
  flush();
  return ids;
}

std::shared_ptr<Stream> Conversation::begin_turn(const std::string& user, const TurnOptions& options, bool wait) {
  refuse_in_turn("begin another");
  auto turn = std::make_unique<Turn>();
  const int64_t max_tokens = options.max_tokens;
  const int64_t context = runner_.options().model.context;
  // Room the answer needs: what was asked for, held to half the context; a quarter when unbounded.
  const int64_t room = max_tokens > 0 ? std::min(max_tokens, context / 2) : std::max<int64_t>(1, context / 4);
  // The conversation as it will be; it replaces this one only once its request is queued.
  std::vector<ConversationMessage> next = messages_;
  next.push_back({"user", user, {}});
  std::vector<int32_t> prompt = render(next, true);
  const size_t first_turn = next[0].role == "system" ? 1 : 0;
  while (int64_t(prompt.size()) + room > context) {
    if (next.size() - first_turn <= 1)
      value_error("the message takes " + std::to_string(prompt.size()) + " tokens with the conversation's start; "
                  "the context holds " + std::to_string(context) + " with room for an answer (raise -c)");
    // The oldest exchange goes (a user message and the answer after it).
    const size_t drop = next.size() - first_turn >= 3 && next[first_turn + 1].role == "assistant" ? 2 : 1;
    next.erase(next.begin() + std::ptrdiff_t(first_turn), next.begin() + std::ptrdiff_t(first_turn + drop));
    turn->dropped += int64_t(drop);
    prompt = render(next, true);
  }
  // Only what the cache does not hold is prefilled: the engine finds it in the slot (Request::
  // reuse_cache), unless this conversation was just begun or loaded.
  Request request;
  request.prompt = prompt;
  request.sampling = options.sampling ? *options.sampling : runner_.options().model.sampling;
  if (max_tokens >= 0) request.max_tokens = max_tokens;
  request.skip_special = true;
  request.reuse_cache = !fresh_;
  request.on_news = options.on_news;
  turn->prompt = int64_t(prompt.size());
  turn->stream = engine_.submit(std::move(request), wait);
  if (!turn->stream) {
    if (wait) value_error("the engine is stopping: no more turns");
    return nullptr;
  }
  messages_ = std::move(next);
  turn_ = std::move(turn);
  return turn_->stream;
}

TurnStats Conversation::end_turn(std::vector<int32_t> answer) {
  if (!turn_) value_error("no turn is in progress to end");
  // The turn is over whatever happens next: a failure below leaves no turn half open.
  const std::unique_ptr<Turn> turn = std::move(turn_);
  const std::shared_ptr<Stream>& stream = turn->stream;
  std::string rest;
  while (stream->take(rest, &answer, std::chrono::milliseconds(20))) rest.clear();
  if (stream->failure()) std::rethrow_exception(stream->failure());
  fresh_ = false;
  TurnStats stats;
  const GenerateStats g = stream->stats();
  stats.prefilled = turn->prompt - stream->reused_tokens();
  stats.dropped_messages = turn->dropped;
  // The cache holds the prompt and every answer token but the last (sampled, never fed back).
  cached_ = turn->prompt + std::max<int64_t>(int64_t(answer.size()) - 1, 0);
  const text::Tokenizer& t = runner_.tokenizer();
  if (!answer.empty() && t.is_end(answer.back())) answer.pop_back();
  messages_.push_back({"assistant", t.decode(answer, {.skip_special = true}), answer});
  stats.generated = g.generated_tokens;
  stats.answer_seconds = g.generate_seconds;
  stats.stop = g.stop;
  stats.cached = cached_;
  return stats;
}

TurnStats Conversation::reply(const std::string& user, int64_t max_tokens,
                              const std::function<void(const std::string&)>& on_text,
                              const std::atomic<bool>* interrupt) {
  TurnOptions options;
  options.max_tokens = max_tokens;
  const std::shared_ptr<Stream> stream = begin_turn(user, options);
  std::vector<int32_t> answer;
  try {
    for (bool more = true; more;) {
      std::string piece;
      more = stream->take(piece, &answer, std::chrono::milliseconds(20));
      if (!piece.empty()) on_text(piece);
      if (interrupt && interrupt->load(std::memory_order_relaxed)) stream->cancel();
    }
  } catch (...) {
    // A reader that failed (on_text threw) ends the turn as far as it got, so the next can begin.
    stream->cancel();
    try {
      end_turn(std::move(answer));
    } catch (...) {
    }
    throw;
  }
  return end_turn(std::move(answer));
}

Conversation::~Conversation() {
  if (turn_) turn_->stream->cancel();
}

void Conversation::refuse_in_turn(const char* what) const {
  if (turn_) value_error(std::string("a turn is in progress: end it before you ") + what);
}

nlohmann::json Conversation::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const ConversationMessage& m : messages_) {
    nlohmann::json item = {{"role", m.role}, {"content", m.content}};
    if (!m.ids.empty()) item["ids"] = m.ids;
    list.push_back(std::move(item));
  }
  return {{"messages", list}};
}

std::vector<ConversationMessage> conversation_from_json(const nlohmann::json& conversation, int64_t vocab) {
  const auto* list = conversation.is_object() && conversation.contains("messages") ? &conversation["messages"] : nullptr;
  if (!list || !list->is_array()) value_error("conversation: not an object with a \"messages\" list");
  std::vector<ConversationMessage> loaded;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& m = (*list)[i];
    const std::string where = "conversation: message " + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      value_error(where + " has no \"role\" and \"content\" strings");
    ConversationMessage out{m["role"].get<std::string>(), m["content"].get<std::string>(), {}};
    if (out.role != "system" && out.role != "user" && out.role != "assistant")
      value_error(where + ": role \"" + escaped(out.role, 40) + "\" is not system, user or assistant");
    if (out.role == "system" && i != 0) value_error(where + ": a system message comes first");
    if (m.contains("ids")) {
      if (!m["ids"].is_array() || out.role != "assistant") value_error(where + ": \"ids\" is a list, on assistant messages");
      for (const nlohmann::json& id : m["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
          value_error(where + ": an id " + escaped(id.dump(), 40) + " is not one of the model's " +
                      std::to_string(vocab));
        out.ids.push_back(int32_t(id.get<int64_t>()));
      }
    }
    loaded.push_back(std::move(out));
  }
  return loaded;
}

void Conversation::load_json(const nlohmann::json& conversation) {
  refuse_in_turn("load another conversation");
  std::vector<ConversationMessage> loaded = conversation_from_json(conversation, runner_.config().vocab);
  render(loaded, false);  // a template that refuses this conversation says so now, not at the next turn
  messages_ = std::move(loaded);
  cached_ = 0;
  fresh_ = true;
}

}  // namespace iron::models
