// Chat formatting without a Jinja engine: ChatML templates are recognised by their markers and
// rendered directly. SmolLM2's template (and others like it) inserts a default system message
// when the conversation does not start with one; that message is read out of the template.
#include <algorithm>

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

/// The default system turn of a ChatML template: the text the template prints when the first
/// message is not a system one ({% if ... messages[0]['role'] != 'system' %}{{ '...' }}).
std::optional<std::string> default_system_turn(const std::string& tmpl) {
  size_t cond = std::string::npos;
  for (const char* form : {"['role'] != 'system'", "[\"role\"] != \"system\"", ".role != 'system'",
                           ".role != \"system\""}) {
    cond = std::min(cond, tmpl.find(form));
  }
  if (cond == std::string::npos) return std::nullopt;
  const size_t block_end = tmpl.find("{% endif", cond);
  const size_t marker = tmpl.find("<|im_start|>system", cond);
  if (marker == std::string::npos || marker > block_end) {
    value_error("chat template: the default system message could not be read from the template");
  }
  const size_t quote = tmpl.find_last_of("'\"", marker);
  const auto literal = quote == std::string::npos ? std::nullopt : read_string_literal(tmpl, quote);
  if (!literal || literal->find("<|im_start|>system") != 0) {
    value_error("chat template: the default system message could not be read from the template");
  }
  return literal;
}

std::string chatml_turn(const ChatMessage& m) {
  return "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
}

}  // namespace

std::string format_chat(const std::optional<std::string>& chat_template,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        ChatTemplateFallback fallback) {
  const bool chatml = chat_template && chat_template->find("<|im_start|>") != std::string::npos;
  if (!chatml && fallback == ChatTemplateFallback::error) {
    if (!chat_template) value_error("chat template: the model has no chat template");
    value_error(
        "chat template: unsupported template (only ChatML is rendered; pass "
        "ChatTemplateFallback::chatml to use ChatML anyway): \"" +
        escaped(*chat_template, 120) + "\"");
  }
  std::string out;
  if (chatml && !messages.empty() && messages[0].role != "system") {
    if (const auto system = default_system_turn(*chat_template)) out += *system;
  }
  for (const ChatMessage& m : messages) out += chatml_turn(m);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace iron::text
