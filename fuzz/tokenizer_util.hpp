// Exercising a built tokenizer on a text: encode in every mode, decode, stream-decode, and the
// invariants that hold for any vocabulary.
#pragma once

#include "fuzz_util.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::fuzz {

/// Stream-decodes `ids` one at a time: every piece is valid UTF-8, and when the whole decode is
/// valid UTF-8 the pieces add up to it.
inline void check_stream_decode(const text::Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                const text::DecodeOptions& options) {
  const std::string whole = tokenizer.decode(ids, options);
  text::StreamDecoder stream(tokenizer, options);
  std::string pieces;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    IRON_FUZZ_CHECK(valid_utf8(piece));
    pieces += piece;
  }
  const std::string tail = stream.flush();
  IRON_FUZZ_CHECK(valid_utf8(tail));
  pieces += tail;
  if (valid_utf8(whole)) IRON_FUZZ_CHECK(pieces == whole);
  // Reusable after flush.
  for (int32_t id : ids) IRON_FUZZ_CHECK(valid_utf8(stream.push(id)));
  IRON_FUZZ_CHECK(valid_utf8(stream.flush()));
}

/// Encodes `text` every way, checks the ids and decodes them; returns the plain encoding
/// (no BOS, no special-token parsing).
inline std::vector<int32_t> exercise(const text::Tokenizer& tokenizer, std::string_view text) {
  const int32_t vocab = tokenizer.vocab_size();
  IRON_FUZZ_CHECK(vocab > 0);
  std::vector<int32_t> plain;
  for (bool parse_special : {false, true}) {
    for (bool add_bos : {false, true}) {
      expect_ok_or_error([&] {
        const std::vector<int32_t> ids = tokenizer.encode(text, add_bos, parse_special);
        for (int32_t id : ids) IRON_FUZZ_CHECK(id >= 0 && id < vocab);
        if (add_bos) IRON_FUZZ_CHECK(!ids.empty() && ids[0] == tokenizer.bos_id());
        if (!add_bos && !parse_special) plain = ids;
        for (bool skip_special : {false, true}) {
          for (bool strip : {false, true}) {
            text::DecodeOptions options;
            options.skip_special = skip_special;
            options.strip_prefix_space = strip;
            check_stream_decode(tokenizer, ids, options);
          }
        }
        for (int32_t id : ids) {
          IRON_FUZZ_CHECK(tokenizer.find_token(tokenizer.token_string(id)).has_value());
          (void)tokenizer.token_text(id);
          (void)tokenizer.token_type(id);
          (void)tokenizer.is_end(id);
        }
      });
    }
  }
  // Ids out of range are refused.
  for (int32_t bad : {-1, vocab, INT32_MIN, INT32_MAX}) {
    bool refused = false;
    try {
      (void)tokenizer.decode({bad});
    } catch (const iron::Error&) {
      refused = true;
    }
    IRON_FUZZ_CHECK(refused);
  }
  return plain;
}

/// The chat template, rendered (or refused) with the tokenizer's template.
inline void exercise_chat(const text::Tokenizer& tokenizer, std::string_view content) {
  const std::vector<text::ChatMessage> messages = {{"user", std::string(content)}};
  for (auto fallback : {text::ChatTemplateFallback::error, text::ChatTemplateFallback::chatml}) {
    expect_ok_or_error([&] {
      const std::string prompt = tokenizer.apply_chat_template(messages, true, fallback);
      IRON_FUZZ_CHECK(prompt.find(content) != std::string::npos);
    });
  }
}

}  // namespace iron::fuzz
