// UTF-8 handling, code point classes and the hand-written GPT-2 pre-tokenizer.
#include "text/unicode.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "text/tokenizer_impl.hpp"

namespace iron::text {
namespace {

using detail::CharClass;

TEST(Unicode, ClassifiesLettersNumbersAndWhiteSpace) {
  for (uint32_t cp : {0x61u, 0xE9u, 0x65E5u, 0x416u, 0x5D0u, 0xD55Cu}) {
    EXPECT_EQ(detail::classify(cp), CharClass::letter) << std::hex << cp;
  }
  for (uint32_t cp : {0x35u, 0xBDu, 0xB2u, 0x663u, 0x2167u, 0x2460u}) {
    EXPECT_EQ(detail::classify(cp), CharClass::number) << std::hex << cp;
  }
  for (uint32_t cp : {0x20u, 0x9u, 0xAu, 0xDu, 0xA0u, 0x3000u, 0x2028u, 0x85u}) {
    EXPECT_EQ(detail::classify(cp), CharClass::space) << std::hex << cp;
  }
  // U+001C is a space to Python's isspace() but not to \s; combining marks are not letters.
  for (uint32_t cp : {0x1Cu, 0x21u, 0x301u, 0x1F600u, 0x200Bu, 0x10FFFFu, 0x110000u}) {
    EXPECT_EQ(detail::classify(cp), CharClass::other) << std::hex << cp;
  }
}

TEST(Unicode, DecodesOnlyValidUtf8) {
  const auto unit = [](std::string_view s) { return detail::decode_utf8(s, 0); };
  EXPECT_EQ(unit("A").cp, 0x41u);
  EXPECT_EQ(unit("\xC3\xA9").cp, 0xE9u);
  EXPECT_EQ(unit("\xE6\x97\xA5").cp, 0x65E5u);
  EXPECT_EQ(unit("\xF0\x9F\x98\x80").cp, 0x1F600u);
  EXPECT_EQ(unit("\xF0\x9F\x98\x80").len, 4u);
  for (std::string_view bad :
       {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE6\x97", "\x80", "\xFF", "\xC3("}) {
    const auto u = unit(bad);
    EXPECT_FALSE(u.valid);
    EXPECT_EQ(u.len, 1u);
  }
  EXPECT_TRUE(detail::is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(detail::is_valid_utf8("h\xC3"));
  EXPECT_EQ(detail::sanitize_utf8("a\xFF"
                                  "b"),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Unicode, HoldsBackOnlyCharactersThatCanStillComplete) {
  EXPECT_EQ(detail::utf8_emittable_prefix("ab"), 2u);
  EXPECT_EQ(detail::utf8_emittable_prefix("ab\xE6"), 2u);
  EXPECT_EQ(detail::utf8_emittable_prefix("ab\xE6\x97"), 2u);
  EXPECT_EQ(detail::utf8_emittable_prefix("ab\xE6\x97\xA5"), 5u);
  EXPECT_EQ(detail::utf8_emittable_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(detail::utf8_emittable_prefix("ab\xFF"), 3u);      // never valid: let it out
  EXPECT_EQ(detail::utf8_emittable_prefix("ab\xE0\x80"), 4u);  // E0 80 is overlong already
  EXPECT_EQ(detail::utf8_emittable_prefix("\x80\x80\x80"), 3u);
  EXPECT_EQ(detail::utf8_emittable_prefix(""), 0u);
}

TEST(Unicode, ByteLevelAlphabetIsABijection) {
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = detail::byte_to_unicode(uint8_t(b));
    EXPECT_EQ(detail::unicode_to_byte(cp), b);
    seen.insert(cp);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(detail::byte_to_unicode('A'), uint32_t('A'));
  EXPECT_EQ(detail::byte_to_unicode(' '), 0x120u);   // Ġ
  EXPECT_EQ(detail::byte_to_unicode('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(detail::unicode_to_byte(0x20), -1);
  EXPECT_EQ(detail::unicode_to_byte(0x5000), -1);
}

std::vector<std::string> words(std::string_view text, PreTokenizerKind kind) {
  std::vector<std::string> out;
  for (auto w : pretokenize(text, kind)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Pattern) {
  const auto g = PreTokenizerKind::gpt2;
  EXPECT_EQ(words("Hello world", g), (Words{"Hello", " world"}));
  EXPECT_EQ(words("a  b", g), (Words{"a", " ", " b"}));
  EXPECT_EQ(words("end   ", g), (Words{"end", "   "}));
  EXPECT_EQ(words("\ta", g), (Words{"\t", "a"}));
  EXPECT_EQ(words("a\n\n b", g), (Words{"a", "\n\n", " b"}));
  EXPECT_EQ(words("don't we'll 'sx", g), (Words{"don", "'t", " we", "'ll", " '", "sx"}));
  EXPECT_EQ(words("x  12345 3.14", g), (Words{"x", " ", " 12345", " 3", ".", "14"}));
  EXPECT_EQ(words("hi!!! ?", g), (Words{"hi", "!!!", " ?"}));
  EXPECT_EQ(words("", g), Words{});
  // Bytes that are not UTF-8 are punctuation to the pattern, never dropped.
  EXPECT_EQ(words("a\xFF\xFE"
                  "b",
                  g),
            (Words{"a", "\xFF\xFE", "b"}));
}

TEST(PreTokenizer, SmolLMIsolatesEveryDigit) {
  const auto s = PreTokenizerKind::smollm;
  EXPECT_EQ(words("x  12 and", s), (Words{"x", "  ", "1", "2", " and"}));
  EXPECT_EQ(words("3.14", s), (Words{"3", ".", "1", "4"}));
  EXPECT_EQ(words("v2beta", s), (Words{"v", "2", "beta"}));
  EXPECT_EQ(words("\xC2\xBD \xD9\xA3", s), (Words{"\xC2\xBD", " ", "\xD9\xA3"}));
}

}  // namespace
}  // namespace iron::text

namespace iron::text {
namespace {

// The hand-written scanners against the `tokenizers` package's regex engine running the
// patterns themselves (tests/golden/tokenizer_pretokenizers.json).
TEST(PreTokenizer, MatchesTheRegexEngine) {
  std::ifstream in(std::string(IRON_SOURCE_DIR) + "/tests/golden/tokenizer_pretokenizers.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const auto& [name, kind] :
       {std::pair{"gpt2", PreTokenizerKind::gpt2}, std::pair{"llama-bpe", PreTokenizerKind::llama3},
        std::pair{"qwen2", PreTokenizerKind::qwen2}}) {
    ASSERT_GT(golden[name].size(), 80u);
    for (const auto& c : golden[name]) {
      const std::string text = c["text"];
      EXPECT_EQ(words(text, kind), c["words"].get<Words>()) << name << ": " << text;
    }
  }
}

}  // namespace
}  // namespace iron::text
