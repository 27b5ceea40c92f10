// Unicode NFC (src/text/nfc.cpp) against Python's unicodedata (tests/golden/nfc.json, written by
// scripts/nfc_golden.py): every code point with a canonical decomposition, with combining marks of
// several classes after it, Hangul, singletons, exclusions and random strings.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "iron/error.hpp"
#include "text/nfc.hpp"

namespace iron::text::detail {
namespace {

TEST(Nfc, MatchesPythonUnicodedata) {
  std::ifstream in(std::string(IRON_SOURCE_DIR) + "/tests/golden/nfc.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["cases"].size(), 500u);
  int changed = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"], expected = c["nfc"];
    EXPECT_EQ(nfc(text), expected) << escaped(text);
    EXPECT_EQ(nfc(expected), expected) << escaped(expected);  // NFC is idempotent
    changed += text != expected;
  }
  EXPECT_GE(changed, 400);  // the golden exercises the normaliser, not the copy
}

TEST(Nfc, ComposesDecomposesAndKeepsInvalidBytes) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                      // e + U+0301 -> U+00E9
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                   // U+212B ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo G A G -> U+AC01
  EXPECT_EQ(nfc("plain ascii\n"), "plain ascii\n");
  // An invalid byte stays, and parts either side are normalised on their own.
  EXPECT_EQ(nfc("e\xCC\x81\xFF" "e\xCC\x81"), "\xC3\xA9\xFF\xC3\xA9");
  EXPECT_EQ(nfc("e\xFF\xCC\x81"), "e\xFF\xCC\x81");
  EXPECT_EQ(combining_class(0x0301), 230);
  EXPECT_EQ(combining_class('a'), 0);
}

// Untrusted text: any bytes (invalid UTF-8, lone marks, long runs of non-starters) normalise
// without failing, keep their invalid bytes, and a second pass changes nothing.
TEST(Nfc, AnyBytesNormaliseAndStayPut) {
  std::mt19937 rng(5);
  const std::string pieces[] = {"a", "e\xCC\x81", "\xCC\x81", "\xCC\xA3", "\xE1\x84\x80", "\xE1\x85\xA1",
                                "\xEA\xB0\x80", "\xE1\x86\xA8", "\xFF", "\xC3", "\xE2\x84\xAB", " ", "\xF0\x9F\x98\x80"};
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    const int n = int(rng() % 40);
    for (int j = 0; j < n; ++j) text += pieces[rng() % std::size(pieces)];
    const std::string once = nfc(text);
    EXPECT_EQ(nfc(once), once) << escaped(text);
    EXPECT_EQ(std::count(once.begin(), once.end(), '\xFF'), std::count(text.begin(), text.end(), '\xFF'));
  }
  EXPECT_EQ(nfc(std::string(10000, '\xCC')), std::string(10000, '\xCC'));
  std::string marks;
  for (int i = 0; i < 5000; ++i) marks += i % 2 ? "\xCC\x81" : "\xCC\xA3";
  EXPECT_EQ(nfc("a" + marks).size(), 1 + marks.size());  // sorted, none composes past the first
}

}  // namespace
}  // namespace iron::text::detail
