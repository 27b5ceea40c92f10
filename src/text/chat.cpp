// Chat formatting without a Jinja engine: the templates of the models IRON runs are recognised by
// their markers and rendered directly. ChatML (SmolLM2, Qwen): SmolLM2's template (and others
// like it) and Qwen2.5's insert a default system message when the conversation does not start
// with one; that message is read out of the template. Gemma: turns between <start_of_turn> and
// <end_of_turn>, the assistant called "model", a system message folded into the first user turn.
#include <algorithm>
#include <string_view>

#include "iron/error.hpp"
#include "iron/text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

/// Reads the Jinja string literal starting at `pos` (at its quote) and undoes its escapes.
std::optional<std::string> read_string_literal(const std::string& s, size_t pos) {
  const char quote = s[pos];
  std::string out;
  for (size_t i = pos + 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == quote) return out;
    if (c == '\\' && i + 1 < s.size()) {
      const char e = s[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    } else {
      out += c;
    }
  }
  return std::nullopt;
}

/// Where the next Jinja tag `{% keyword` (or `{%- keyword`) at or after `from` starts, or npos.
size_t find_tag(const std::string& tmpl, std::string_view keyword, size_t from) {
  for (size_t at = tmpl.find("{%", from); at != std::string::npos; at = tmpl.find("{%", at + 2)) {
    size_t i = at + 2;
    if (i < tmpl.size() && (tmpl[i] == '-' || tmpl[i] == '+')) ++i;
    while (i < tmpl.size() && (tmpl[i] == ' ' || tmpl[i] == '\t' || tmpl[i] == '\n')) ++i;
    if (tmpl.compare(i, keyword.size(), keyword) != 0) continue;
    const size_t after = i + keyword.size();
    if (after < tmpl.size() && (tmpl[after] == ' ' || tmpl[after] == '-' || tmpl[after] == '%' || tmpl[after] == '\n'))
      return at;
  }
  return std::string::npos;
}

/// The string literal holding "<|im_start|>system" in tmpl[from, to), undone of its escapes and
/// checked to start with it, or nullopt when that stretch has no such marker.
std::optional<std::string> system_literal(const std::string& tmpl, size_t from, size_t to) {
  const size_t marker = tmpl.find("<|im_start|>system", from);
  if (marker == std::string::npos || marker > to) return std::nullopt;
  const size_t quote = tmpl.find_last_of("'\"", marker);
  const auto literal = quote == std::string::npos ? std::nullopt : read_string_literal(tmpl, quote);
  if (!literal || literal->find("<|im_start|>system") != 0) {
    value_error("chat template: the default system message could not be read from the template");
  }
  return literal;
}

/// The default system turn of a ChatML template: the text the template prints when the first
/// message is not a system one. SmolLM2's form prints it under
/// {% if messages[0]['role'] != 'system' %}; Qwen2.5's in the {% else %} of
/// {%- if messages[0]['role'] == 'system' %} (the first such block with a system turn there: its
/// tools branch has one whose else holds only the text, the turn's start written before it).
std::optional<std::string> default_system_turn(const std::string& tmpl) {
  size_t cond = std::string::npos;
  for (const char* form : {"['role'] != 'system'", "[\"role\"] != \"system\"", ".role != 'system'",
                           ".role != \"system\""}) {
    cond = std::min(cond, tmpl.find(form));
  }
  if (cond != std::string::npos) {
    const auto literal = system_literal(tmpl, cond, find_tag(tmpl, "endif", cond));
    if (!literal) value_error("chat template: the default system message could not be read from the template");
    return literal;
  }
  for (const char* form : {"messages[0]['role'] == 'system'", "messages[0][\"role\"] == \"system\"",
                           "messages[0].role == 'system'", "messages[0].role == \"system\""}) {
    for (size_t at = tmpl.find(form); at != std::string::npos; at = tmpl.find(form, at + 1)) {
      const size_t otherwise = find_tag(tmpl, "else", at), endif = find_tag(tmpl, "endif", at);
      if (otherwise == std::string::npos || endif == std::string::npos || otherwise > endif) continue;
      if (auto literal = system_literal(tmpl, otherwise, endif)) return literal;
    }
  }
  return std::nullopt;
}

std::string chatml_turn(const ChatMessage& m) {
  return "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
}

std::string render_chatml(const std::optional<std::string>& chat_template, const std::vector<ChatMessage>& messages,
                          bool add_generation_prompt) {
  std::string out;
  if (chat_template && !messages.empty() && messages[0].role != "system") {
    if (const auto system = default_system_turn(*chat_template)) out += *system;
  }
  for (const ChatMessage& m : messages) out += chatml_turn(m);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Jinja's `trim`: Python's str.strip(), whitespace off both ends.
std::string trimmed(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

// As Gemma 3's template: BOS first, then each turn "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n"
// with content trimmed, the assistant's role called "model", and a leading system message's
// text put in front of the first user turn's, a blank line between. Roles must alternate
// user/model after it, as the template demands.
std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& bos_text) {
  std::string out = bos_text, first_prefix;
  size_t begin = 0;
  if (!messages.empty() && messages[0].role == "system") {
    first_prefix = trimmed(messages[0].content) + "\n\n";
    begin = 1;
  }
  for (size_t i = begin; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool user_turn = (i - begin) % 2 == 0;
    if ((m.role == "user") != user_turn || (m.role != "user" && m.role != "assistant"))
      value_error("chat template: Gemma's conversations alternate user and assistant turns (after an optional "
                  "system message); message " + std::to_string(i) + " is '" + escaped(m.role, 40) + "'");
    out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : "user") + "\n" +
           (i == begin ? first_prefix : std::string()) + trimmed(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

std::optional<ChatFormat> recognise_chat_template(const std::optional<std::string>& chat_template) {
  if (!chat_template) return std::nullopt;
  if (chat_template->find("<|im_start|>") != std::string::npos) return ChatFormat::chatml;
  if (chat_template->find("<start_of_turn>") != std::string::npos) return ChatFormat::gemma;
  return std::nullopt;
}

std::string format_chat(const std::optional<std::string>& chat_template,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        ChatTemplateFallback fallback, const std::string& bos_text) {
  const std::optional<ChatFormat> format = recognise_chat_template(chat_template);
  if (!format && fallback == ChatTemplateFallback::error) {
    if (!chat_template) value_error("chat template: the model has no chat template");
    value_error(
        "chat template: unsupported template (ChatML and Gemma's are rendered; pass "
        "ChatTemplateFallback::chatml to use ChatML anyway): \"" +
        escaped(*chat_template, 120) + "\"");
  }
  if (format == ChatFormat::gemma) return render_gemma(messages, add_generation_prompt, bos_text);
  return render_chatml(format ? chat_template : std::nullopt, messages, add_generation_prompt);
}

}  // namespace iron::text
