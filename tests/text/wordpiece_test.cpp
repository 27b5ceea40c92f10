// WordPiece (BERT) tokenisation: the algorithm on a hand-made vocabulary and validation of the
// data (all-MiniLM-L6-v2's tokenizer.json against PyPI `tokenizers`: model_tokenizers_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_test_util.hpp"
#include "iron/error.hpp"
#include "iron/text/tokenizer.hpp"
#include "text/tokenizer_impl.hpp"

namespace iron::text {
namespace {

using Ids = std::vector<int32_t>;

// [PAD] [UNK] [CLS] [SEP] [MASK], then pieces.
TokenizerData wordpiece_data() {
  TokenizerData d;
  d.model = "wordpiece";
  d.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "aff",
              "able", "!", "cafe", "a", "##a", "##b", "b", "x"};
  d.token_types.assign(d.tokens.size(), int32_t(TokenType::normal));
  for (int i = 0; i < 5; ++i) d.token_types[size_t(i)] = int32_t(TokenType::control);
  d.unk_id = 1, d.bos_id = 2, d.eos_id = 3, d.pad_id = 0;
  d.wordpiece.max_chars_per_word = 9;
  return d;
}

TEST(WordPieceTokenizer, GreedyLongestPiecesWithContinuationPrefix) {
  const Tokenizer t = Tokenizer::build(wordpiece_data());
  EXPECT_EQ(t.encode("unaffable", false), (Ids{5, 6, 7}));  // un ##aff ##able
  EXPECT_EQ(t.encode("aff able!", false), (Ids{8, 9, 10}));
  EXPECT_EQ(t.encode("aab", false), (Ids{12, 13, 14}));
  // No piece covers "ab##c": the whole word is [UNK], not just its tail.
  EXPECT_EQ(t.encode("abc un", false), (Ids{1, 5}));
  // The word-length rule counts characters, not bytes: 9 pass, 10 are [UNK] whole.
  EXPECT_EQ(t.encode("aaaaaaaaa", false), (Ids{12, 13, 13, 13, 13, 13, 13, 13, 13}));
  EXPECT_EQ(t.encode("\xC3\xA0" "aaaaaaaa", false), (Ids{12, 13, 13, 13, 13, 13, 13, 13, 13}));
  EXPECT_EQ(t.encode("aaaaaaaaaa", false), (Ids{1}));
}

TEST(WordPieceTokenizer, NormalisesLikeBert) {
  const Tokenizer t = Tokenizer::build(wordpiece_data());
  EXPECT_EQ(t.encode("CAF\xC3\x89", false), (Ids{11}));        // lower-cased, accent stripped
  EXPECT_EQ(t.encode("cafe\xCC\x81", false), (Ids{11}));       // a combining accent dropped
  EXPECT_EQ(t.encode("a\xC2\xAD" "b", false), (Ids{12, 14}));   // soft hyphen (Cf) removed
  EXPECT_EQ(t.encode("a\tb\xE3\x80\x80x", false), (Ids{12, 15, 16}));  // white space splits
  EXPECT_EQ(t.encode("\xE4\xBD\xA0x", false), (Ids{1, 16}));   // a CJK ideograph is a word
  EXPECT_EQ(bert_normalize("A\xE4\xBD\xA0" "B", WordPieceOptions{}), "a \xE4\xBD\xA0 b");
  // Flags off: nothing changes but what clean_text and the pre-tokeniser do.
  WordPieceOptions raw;
  raw.lowercase = raw.strip_accents = raw.chinese_chars = false;
  EXPECT_EQ(bert_normalize("CAF\xC3\x89\xE4\xBD\xA0", raw), "CAF\xC3\x89\xE4\xBD\xA0");
  // Invalid UTF-8 becomes U+FFFD, which clean_text drops.
  EXPECT_EQ(t.encode("a\xFF\xC0" "b", false), (Ids{12, 14}));
  EXPECT_EQ(bert_pretokenize("a,b  c!"), (std::vector<std::string_view>{"a", ",", "b", "c", "!"}));
}

TEST(WordPieceTokenizer, SentencesAreWrappedAndTruncated) {
  const Tokenizer t = Tokenizer::build(wordpiece_data());
  EXPECT_EQ(t.encode_sentence("", 256), (Ids{2, 3}));
  EXPECT_EQ(t.encode_sentence("a b x", 256), (Ids{2, 12, 15, 16, 3}));
  EXPECT_EQ(t.encode_sentence("a b x", 4), (Ids{2, 12, 15, 3}));  // [SEP] survives the cut
  EXPECT_EQ(t.encode_sentence("a [MASK] b", 256), (Ids{2, 12, 4, 15, 3}));  // literal specials
  EXPECT_THROW(t.encode_sentence("a", 1), Error);
  TokenizerData no_unk = wordpiece_data();
  no_unk.unk_id.reset();
  EXPECT_THROW(Tokenizer::build(no_unk), Error);
  TokenizerData empty_prefix = wordpiece_data();
  empty_prefix.wordpiece.prefix.clear();
  EXPECT_THROW(Tokenizer::build(empty_prefix), Error);
}

TEST(WordPieceTokenizer, MalformedTokenizerJsonIsRefused) {
  const auto refuse = [](const std::string& body, const std::string& words) {
    const std::string path = io::testing::write_temp_file(
        "wordpiece_tokenizer.json", std::vector<uint8_t>(body.begin(), body.end()));
    try {
      read_hf_tokenizer_json(path);
      ADD_FAILURE() << "accepted " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const std::string model = R"("model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2}})";
  const std::string norm = R"("normalizer":{"type":"BertNormalizer"},"pre_tokenizer":{"type":"BertPreTokenizer"})";
  const std::string post =
      R"("post_processor":{"type":"BertProcessing","cls":["[CLS]",1],"sep":["[SEP]",2]})";
  refuse("{" + model + "," + post + "}", "BertNormalizer");
  refuse("{" + model + "," + norm + "}", "post_processor");
  refuse(R"({"model":{"type":"WordPiece","vocab":{"a":0}},)" + norm + "," + post + "}",
         "unknown token");
  refuse(R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0,"b":7}},)" + norm + "," + post + "}",
         "outside");
  refuse("{" + model + "," + norm + R"(,"post_processor":{"type":"BertProcessing","cls":["[CLS]",9],"sep":["[SEP]",2]}})",
         "outside the vocabulary");
  // The smallest well-formed file reads.
  const std::string ok = "{" + model + "," + norm + "," + post + "}";
  const std::string path = io::testing::write_temp_file(
      "wordpiece_ok.json", std::vector<uint8_t>(ok.begin(), ok.end()));
  const Tokenizer t = from_hf_tokenizer_json(path);
  EXPECT_EQ(t.encode_sentence("zzz", 8), (Ids{1, 0, 2}));
}

}  // namespace
}  // namespace iron::text
