// Bytes as a chat template and (after a NUL byte) as message content -> format_chat.
#include "fuzz_util.hpp"
#include "iron/text/tokenizer.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void chat_template(const uint8_t* data, size_t size) {
  const auto [tmpl, rest] = split_at_nul(data, size);
  const std::string content(rest.value_or(tmpl));
  const std::vector<std::vector<text::ChatMessage>> conversations = {
      {{"user", content}},
      {{"system", content}, {"user", "hi"}, {"assistant", content}},
      {{content, content}},
      {},
  };
  for (const std::optional<std::string>& t :
       {std::optional<std::string>(std::string(tmpl)), std::optional<std::string>()}) {
    for (const auto& messages : conversations) {
      for (auto fallback :
           {text::ChatTemplateFallback::error, text::ChatTemplateFallback::chatml}) {
        for (bool generation_prompt : {true, false}) {
          expect_ok_or_error([&] {
            const std::string out = text::format_chat(t, messages, generation_prompt, fallback);
            const bool gemma = text::recognise_chat_template(t) == text::ChatFormat::gemma;
            // Gemma's template folds a leading system message into the first user turn: alone,
            // it makes no turn at all (BOS alone, as the template renders it).
            const bool gemma_turns = messages.size() > (!messages.empty() && messages[0].role == "system" ? 1 : 0);
            for (const auto& m : messages) {
              // ChatML writes each message whole; Gemma's turns hold each content, trimmed.
              if (gemma) {
                IRON_FUZZ_CHECK(!gemma_turns || out.find("<start_of_turn>") != std::string::npos);
              } else {
                IRON_FUZZ_CHECK(out.find("<|im_start|>" + m.role + "\n" + m.content +
                                         "<|im_end|>\n") != std::string::npos);
              }
            }
          });
        }
      }
    }
  }
}

}  // namespace iron::fuzz
