// Tokenizers built from small hand-made vocabularies: the algorithms step by step, validation of
// untrusted data, any bytes as input, streaming and chat formatting.
#include "iron/text/tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <random>
#include <thread>

#include "iron/error.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

using Ids = std::vector<int32_t>;
const std::string kMarker = "\xE2\x96\x81";  // ▁

// <unk> <s> </s>, the 256 byte tokens, then scored pieces.
TokenizerData spm_data() {
  TokenizerData d;
  d.model = "llama";
  const auto add = [&](const std::string& s, float score, TokenType type) {
    d.tokens.push_back(s);
    d.scores.push_back(score);
    d.token_types.push_back(int32_t(type));
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0, TokenType::byte);
  }
  for (const auto& [piece, score] :
       std::vector<std::pair<std::string, float>>{{kMarker, -10},
                                                  {"h", -10},
                                                  {"e", -10},
                                                  {"l", -10},
                                                  {"o", -10},
                                                  {"ll", -1},
                                                  {kMarker + "h", -2},
                                                  {kMarker + "he", -2.5f},
                                                  {"llo", -3},
                                                  {kMarker + "hello", -4}}) {
    add(piece, score, TokenType::normal);
  }
  d.unk_id = 0, d.bos_id = 1, d.eos_id = 2;
  return d;
}

int32_t id_of(const Tokenizer& t, const std::string& s) { return t.find_token(s).value(); }

TEST(SentencePieceTokenizer, MergesHighestScoreFirst) {
  const Tokenizer t = Tokenizer::build(spm_data());
  // ▁ h e l l o: "ll" (-1), then "▁h" (-2), "▁he" (-2.5), "llo" (-3), "▁hello" (-4).
  EXPECT_EQ(t.encode("hello", true), (Ids{1, id_of(t, kMarker + "hello")}));
  EXPECT_EQ(t.encode("hello hello", false),
            (Ids{id_of(t, kMarker + "hello"), id_of(t, kMarker + "hello")}));
  EXPECT_EQ(t.encode("", true), (Ids{1}));
  EXPECT_EQ(t.encode("", false), Ids{});
}

TEST(SentencePieceTokenizer, FallsBackToByteTokens) {
  const Tokenizer t = Tokenizer::build(spm_data());
  // "ö" is not a piece: its two bytes, <0xC3> <0xB6>, after "▁h" "e".
  EXPECT_EQ(t.encode("he\xC3\xB6", false), (Ids{id_of(t, kMarker + "he"), 3 + 0xC3, 3 + 0xB6}));
  EXPECT_EQ(t.decode(t.encode("he\xC3\xB6", false)), " he\xC3\xB6");
}

TEST(SentencePieceTokenizer, SpacePrefixAndSpecialTokens) {
  TokenizerData d = spm_data();
  d.add_space_prefix = false;
  const Tokenizer no_prefix = Tokenizer::build(d);
  EXPECT_EQ(no_prefix.encode("ll", false), (Ids{id_of(no_prefix, "ll")}));

  const Tokenizer t = Tokenizer::build(spm_data());
  // A special token written in the text; the text after it gets the space prefix again.
  const int32_t hello = id_of(t, kMarker + "hello");
  EXPECT_EQ(t.encode("hello</s>hello", false), (Ids{hello, 2, hello}));
  // Without parse_special, "</s>" is just characters (here: byte tokens).
  const Ids literal = t.encode("</s>", false, false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(t.decode(literal), " </s>");
}

// Gemma's user-defined whitespace runs: llama.cpp's converter stores "▁▁" as two spaces, and
// SentencePiece, which matches after writing spaces as ▁, also takes a literal ▁ for a space.
TEST(SentencePieceTokenizer, UserDefinedSpacesAlsoMatchTheSpaceMarker) {
  TokenizerData d = spm_data();
  d.add_space_prefix = false;
  d.tokens.push_back("  ");
  d.scores.push_back(-1000);
  d.token_types.push_back(int32_t(TokenType::user_defined));
  const Tokenizer t = Tokenizer::build(d);
  const int32_t two = t.vocab_size() - 1, hello = id_of(t, kMarker + "hello");
  for (const std::string& spaces :
       std::vector<std::string>{"  ", " " + kMarker, kMarker + " ", kMarker + kMarker}) {
    EXPECT_EQ(t.encode(spaces + "ll", false), (Ids{two, id_of(t, "ll")})) << spaces;
  }
  EXPECT_EQ(t.encode(kMarker + "hello", false), Ids{hello});  // one marker alone: a space
  EXPECT_EQ(t.encode(kMarker, false), Ids{id_of(t, kMarker)});
  EXPECT_EQ(t.decode(t.encode(kMarker + " ll", false)), "  ll");
}

TEST(SentencePieceTokenizer, DecodeOptions) {
  const Tokenizer t = Tokenizer::build(spm_data());
  const int32_t hello = id_of(t, kMarker + "hello");
  EXPECT_EQ(t.decode({1, hello, hello, 2}), "<s> hello hello</s>");
  EXPECT_EQ(t.decode({1, hello, hello, 2}, {.skip_special = true}), " hello hello");
  EXPECT_EQ(t.decode({1, hello, hello, 2}, {.skip_special = true, .strip_prefix_space = true}),
            "hello hello");
  EXPECT_EQ(t.decode({hello, hello}, {.strip_prefix_space = true}), "hello hello");
  EXPECT_EQ(t.token_text(3 + 'A'), "A");
  EXPECT_EQ(t.token_string(3 + 'A'), "<0x41>");
}

// Byte-level BPE: every byte's character, then merged tokens.
TokenizerData bpe_data() {
  TokenizerData d;
  d.model = "gpt2";
  d.pre = "gpt2";
  for (int b = 0; b < 256; ++b) {
    std::string s;
    detail::append_utf8(s, detail::byte_to_unicode(uint8_t(b)));
    d.tokens.push_back(s);
  }
  for (const char* merge : {"l l", "h e", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or",
                            "\xC4\xA0wor l", "\xC4\xA0worl d"}) {
    d.merges.push_back(merge);
    std::string joined = merge;
    joined.erase(joined.find(' '), 1);
    d.tokens.push_back(joined);
  }
  d.tokens.push_back("<|im_start|>");
  d.tokens.push_back("<|im_end|>");
  d.tokens.push_back("<tool>");
  d.token_types.assign(d.tokens.size(), int32_t(TokenType::normal));
  d.token_types[d.tokens.size() - 3] = int32_t(TokenType::control);
  d.token_types[d.tokens.size() - 2] = int32_t(TokenType::control);
  d.token_types[d.tokens.size() - 1] = int32_t(TokenType::user_defined);
  d.eos_id = int32_t(d.tokens.size()) - 2;
  d.chat_template = "{% for m in messages %}<|im_start|>...{% endfor %}";
  return d;
}

TEST(ByteLevelTokenizer, MergesByRank) {
  const Tokenizer t = Tokenizer::build(bpe_data());
  EXPECT_EQ(t.encode("hello world", false), (Ids{id_of(t, "hello"), id_of(t, "\xC4\xA0world")}));
  // "hel": "h e" (rank 1) then nothing: "he" "l".
  EXPECT_EQ(t.encode("hel", false), (Ids{id_of(t, "he"), 'l'}));
  EXPECT_EQ(t.decode(t.encode("hello world", false)), "hello world");
  EXPECT_EQ(t.token_text(id_of(t, "\xC4\xA0world")), " world");
  EXPECT_FALSE(t.add_bos_by_default());
  EXPECT_TRUE(t.is_end(*t.find_token("<|im_end|>")));
}

TEST(ByteLevelTokenizer, SpecialAndUserDefinedTokens) {
  const Tokenizer t = Tokenizer::build(bpe_data());
  const int32_t start = id_of(t, "<|im_start|>"), tool = id_of(t, "<tool>");
  EXPECT_EQ(t.encode("<|im_start|>hello<tool>", false), (Ids{start, id_of(t, "hello"), tool}));
  // User-defined tokens are matched even without parse_special; control tokens are not.
  const Ids ids = t.encode("<|im_start|><tool>", false, false);
  EXPECT_EQ(ids.back(), tool);
  EXPECT_EQ(t.decode(ids), "<|im_start|><tool>");
  EXPECT_THROW(t.encode("x", true), Error);  // no BOS token in this vocabulary
}

TEST(ByteLevelTokenizer, IgnoreMergesTakesWholeWords) {
  TokenizerData d = bpe_data();
  d.tokens.push_back("abc");  // reachable only as a whole word: no merges make it
  d.token_types.push_back(int32_t(TokenType::normal));
  EXPECT_EQ(Tokenizer::build(d).encode("abc", false), (Ids{'a', 'b', 'c'}));
  d.ignore_merges = true;
  const Tokenizer t = Tokenizer::build(d);
  EXPECT_EQ(t.encode("abc", false), (Ids{id_of(t, "abc")}));
}

template <class F>
void expect_value_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::value);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TokenizerValidation, RejectsMalformedData) {
  const auto build_with = [](auto change) {
    return [change] {
      TokenizerData d = bpe_data();
      change(d);
      Tokenizer::build(d);
    };
  };
  expect_value_error(build_with([](TokenizerData& d) {
                       d.tokens.clear();
                       d.token_types.clear();
                     }),
                     "empty");
  expect_value_error(build_with([](TokenizerData& d) { d.model = "rwkv"; }), "rwkv");
  expect_value_error(build_with([](TokenizerData& d) { d.pre = "mystery"; }), "mystery");
  expect_value_error(build_with([](TokenizerData& d) { d.scores = {1.0f}; }), "scores");
  expect_value_error(build_with([](TokenizerData& d) { d.token_types.pop_back(); }), "types");
  expect_value_error(build_with([](TokenizerData& d) { d.token_types[5] = 9; }), "type 9");
  expect_value_error(build_with([](TokenizerData& d) { d.eos_id = 100000; }), "EOS id 100000");
  expect_value_error(build_with([](TokenizerData& d) { d.bos_id = -1; }), "BOS id -1");
  expect_value_error(build_with([](TokenizerData& d) { d.merges.push_back("hello"); }),
                     "separated by a space");
  expect_value_error(build_with([](TokenizerData& d) { d.merges.push_back("zz q"); }), "\"zz\"");
  expect_value_error(build_with([](TokenizerData& d) { d.merges.push_back("a b"); }), "\"ab\"");
  expect_value_error(build_with([](TokenizerData& d) { d.merges.push_back("a "); }), "space");
  TokenizerData spm = spm_data();
  spm.tokens[3] = "<0xZZ>";
  expect_value_error([&] { Tokenizer::build(spm); }, "<0xNN>");
}

TEST(TokenizerValidation, ChecksEveryIdItIsGiven) {
  const Tokenizer t = Tokenizer::build(bpe_data());
  for (const int32_t bad : {-1, t.vocab_size(), INT32_MAX, INT32_MIN}) {
    EXPECT_THROW(t.decode({0, bad}), Error);
    EXPECT_THROW(t.token_text(bad), Error);
    StreamDecoder stream(t);
    EXPECT_THROW(stream.push(bad), Error);
  }
  try {
    t.decode({t.vocab_size()});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::index);
  }
}

TEST(TokenizerSafety, AnyBytesEncodeAndDecodeBack) {
  const Tokenizer spm = Tokenizer::build(spm_data());
  const Tokenizer bpe = Tokenizer::build(bpe_data());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text(size_t(rng() % 24), '\0');
    for (char& c : text) c = char(rng() % 4 == 0 ? 'l' : rng() % 256);
    EXPECT_EQ(bpe.decode(bpe.encode(text, false, false)), text);
    // SentencePiece adds its space prefix; no special-token parsing so "<s>" stays text.
    EXPECT_EQ(spm.decode(spm.encode(text, false, false)), text.empty() ? "" : " " + text);
  }
}

TEST(TokenizerSafety, MalformedTokenStringsAreKeptAsBytes) {
  TokenizerData d = bpe_data();
  d.tokens.push_back("\xFF\xC3");  // not UTF-8, not byte-level characters
  d.token_types.push_back(int32_t(TokenType::normal));
  const Tokenizer t = Tokenizer::build(d);
  EXPECT_EQ(t.token_text(t.vocab_size() - 1), "\xFF\xC3");
  StreamDecoder stream(t);
  EXPECT_EQ(stream.push(t.vocab_size() - 1), "\xEF\xBF\xBD");  // FF is never valid
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");                   // C3 never completed
}

TEST(TokenizerSafety, EncodeIsSafeFromManyThreads) {
  const Tokenizer t = Tokenizer::build(bpe_data());
  const Ids expected = t.encode("hello world hello", false);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        if (t.encode("hello world hello", false) != expected) ++mismatches;
        t.encode("other words " + std::to_string(k), false);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, 0);
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  const Tokenizer t = Tokenizer::build(spm_data());
  StreamDecoder stream(t);
  // 日 is E6 97 A5: three byte tokens.
  EXPECT_EQ(stream.push(3 + 0xE6), "");
  EXPECT_EQ(stream.push(3 + 0x97), "");
  EXPECT_EQ(stream.push(3 + 0xA5), "\xE6\x97\xA5");
  EXPECT_EQ(stream.push(id_of(t, kMarker + "hello")), " hello");
  EXPECT_EQ(stream.push(3 + 0xE6), "");
  EXPECT_EQ(stream.push(3 + 'x'), "\xEF\xBF\xBDx");  // the E6 can no longer complete
  EXPECT_EQ(stream.push(3 + 0xF0), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, SameTextAsDecode) {
  const Tokenizer t = Tokenizer::build(spm_data());
  const DecodeOptions options{.skip_special = true, .strip_prefix_space = true};
  const Ids ids = t.encode("hello h\xC3\xA9llo \xF0\x9F\x98\x80", true);
  StreamDecoder stream(t, options);
  std::string out;
  for (const int32_t id : ids) out += stream.push(id);
  out += stream.flush();
  EXPECT_EQ(out, t.decode(ids, options));
  EXPECT_EQ(out, "hello h\xC3\xA9llo \xF0\x9F\x98\x80");
}

const std::string kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are helpful<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplate, ChatMLWithDefaultSystemMessage) {
  EXPECT_EQ(format_chat(kSmolTemplate, {{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(format_chat(kSmolTemplate, {{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(format_chat(kSmolTemplate, {}, true), "<|im_start|>assistant\n");
  // Escaped newlines in the literal, as some templates write them.
  std::string escaped = kSmolTemplate;
  escaped.replace(escaped.find("system\n"), 7, "system\\n");
  EXPECT_EQ(format_chat(escaped, {{"user", "Hi"}}, false),
            "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // Plain ChatML without a default system message.
  EXPECT_EQ(format_chat(std::string("{{'<|im_start|>' + m }}"), {{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// The shape of Gemma 3's template: BOS, a system message folded into the first user turn, the
// assistant called "model", contents trimmed.
const std::string kGemmaTemplate =
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\n\n' -%}...{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if "
    "loop.first else \"\") }}...{{ '<end_of_turn>\n' }}{%- if add_generation_prompt -%}"
    "{{'<start_of_turn>model\n'}}{%- endif -%}";

TEST(ChatTemplate, GemmaTurns) {
  EXPECT_EQ(recognise_chat_template(kGemmaTemplate), ChatFormat::gemma);
  EXPECT_EQ(format_chat(kGemmaTemplate, {{"user", " Hi \n"}}, true, ChatTemplateFallback::error, "<bos>"),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(format_chat(kGemmaTemplate, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}},
                        false, ChatTemplateFallback::error, "<bos>"),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n");
  // A system message alone makes no turn: the template only ever writes it in front of the first
  // user turn's text (found by fuzz_chat_template, whose check expected a turn).
  EXPECT_EQ(format_chat(kGemmaTemplate, {{"system", "Be brief."}}, false, ChatTemplateFallback::error, "<bos>"), "<bos>");
  EXPECT_EQ(format_chat(kGemmaTemplate, {{"system", "Be brief."}}, true, ChatTemplateFallback::error, "<bos>"),
            "<bos><start_of_turn>model\n");
  // Turns that do not alternate are refused, as the template's own check refuses them.
  expect_value_error([&] { format_chat(kGemmaTemplate, {{"user", "a"}, {"user", "b"}}, true); },
                     "alternate user and assistant");
  expect_value_error([&] { format_chat(kGemmaTemplate, {{"tool", "a"}}, true); }, "message 0 is 'tool'");
}

TEST(ChatTemplate, UnknownTemplatesAreRefusedUnlessAFallbackIsChosen) {
  const std::string llama3 = "{{ '<|start_header_id|>' + message['role'] }}";
  expect_value_error([&] { format_chat(llama3, {{"user", "Hi"}}, true); }, "<|start_header_id|>");
  expect_value_error(
      [&] {
        format_chat(std::nullopt, {{"user", "Hi"}}, true);
      },
      "no chat template");
  EXPECT_EQ(format_chat(llama3, {{"user", "Hi"}}, true, ChatTemplateFallback::chatml),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const Tokenizer t = Tokenizer::build(spm_data());
  expect_value_error([&] { t.apply_chat_template({{"user", "Hi"}}); }, "no chat template");
}

std::string write_temp(const std::string& name, const std::string& content) {
  const auto dir = std::filesystem::temp_directory_path() / ("iron_tokenizer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << content;
  return path.string();
}

TEST(HfTokenizerJson, LoadsASmallByteLevelModel) {
  const std::string path = write_temp("small.json", R"({
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "added_tokens": [{"id": 4, "content": "<|end|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3},
              "merges": [["a", "b"]]}})");
  const Tokenizer t = from_hf_tokenizer_json(path);
  EXPECT_EQ(t.vocab_size(), 5);
  EXPECT_EQ(t.encode("ab<|end|>", false), (Ids{2, 4}));
  EXPECT_EQ(t.token_type(4), TokenType::control);
}

TEST(HfTokenizerJson, RecognisesLlama3AndQwen2Patterns) {
  const std::string llama3 =
      R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)re";
  std::string qwen2 = llama3;
  qwen2.replace(qwen2.find("{1,3}"), 5, "");
  for (const auto& [pattern, expected] :
       {std::pair{llama3, Ids{2, 3, 8}}, std::pair{qwen2, Ids{2, 3, 4, 5, 6}}}) {
    const std::string path = write_temp("split.json", R"({
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": ")" + pattern +
                                                          R"("}, "behavior": "Isolated",
         "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
      "model": {"type": "BPE", "ignore_merges": true,
                "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "1": 4, "2": 5, "3": 6, "12": 7,
                          "123": 8},
                "merges": ["a b", "1 2", "12 3"]}})");
    EXPECT_EQ(from_hf_tokenizer_json(path).encode("ab 123", false), expected) << pattern;
  }
}

TEST(HfTokenizerJson, RefusesWhatItCannotRun) {
  struct Case {
    const char* file;
    const char* json;
    const char* message;  // a part of the error's message
  };
  const Case cases[] = {
      {"wp.json", R"({"model": {"type": "WordPiece", "vocab": {}}})", "WordPiece"},
      // NFC is the one normaliser taken (Qwen2's); NFKC and the rest are refused.
      {"norm.json", R"({"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})",
       "NFKC"},
      {"pre.json",
       R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
       "Whitespace"},
      {"gap.json",
       R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}})",
       "id 1"},
      // A huge id in a tiny file is a gap like any other, found without sizing a table by it.
      {"huge_id.json",
       R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000000}, "merges": []}})",
       "no token has id 1"},
      {"float_id.json",
       R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 2.5e21}, "merges": []}})",
       "token id 2.5e+21 is not an integer"},
      {"bad.json", "{not json", "not valid JSON"},
      {"merge.json",
       R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [1]}})",
       "merge"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    expect_value_error([&] { from_hf_tokenizer_json(write_temp(c.file, c.json)); }, c.message);
  }
  try {
    from_hf_tokenizer_json("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
  }
}

}  // namespace
}  // namespace iron::text
