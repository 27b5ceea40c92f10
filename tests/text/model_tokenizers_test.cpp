// The tokenizers of the test models against independent references: the golden files
// scripts/tokenizer_golden.py writes (Hugging Face `tokenizers` for SmolLM2, a plain
// SentencePiece re-implementation checked against llama2.c's known outputs for stories260K,
// Google's `sentencepiece` library on Gemma 3's vocabulary, itself checked against llama.cpp;
// Hugging Face `tokenizers` on Qwen2.5's vocabulary and merges, jinja2 for its chat template);
// and the sentence encoders' tokenizer.json files against `tokenizers`
// (scripts/encoder_tokenizer_golden.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "io/io_test_util.hpp"
#include "iron/error.hpp"
#include "iron/io/gguf.hpp"
#include "iron/text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

using nlohmann::json;

const std::string kStories = io::testing::stories_path();
const std::string kSmolLM2 = io::testing::local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
const std::string kGemma3 = io::testing::local_model_path("gemma-3-270m-q4_k_m.gguf");
const std::string kQwen2 = io::testing::local_model_path("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");

json golden(const std::string& name) {
  std::ifstream in(std::string(IRON_SOURCE_DIR) + "/tests/golden/tokenizer_" + name + ".json");
  return json::parse(in);
}

const Tokenizer& stories() {
  static const Tokenizer t = tokenizer_from_gguf(io::GgufFile::open(kStories));
  return t;
}

const Tokenizer& smollm2() {
  static const Tokenizer t = tokenizer_from_gguf(io::GgufFile::open(kSmolLM2));
  return t;
}

const Tokenizer& gemma3() {
  static const Tokenizer t = tokenizer_from_gguf(io::GgufFile::open(kGemma3));
  return t;
}

const Tokenizer& qwen2() {
  static const Tokenizer t = tokenizer_from_gguf(io::GgufFile::open(kQwen2));
  return t;
}

#define SKIP_WITHOUT(path) \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent"

// Each golden case encodes to its ids, and the ids decode back to its text (or to its "decoded"
// field, where the text cannot survive a round trip).
void expect_golden_cases(const Tokenizer& t, const json& cases, bool add_bos, bool parse_special,
                         const DecodeOptions& decode_options) {
  ASSERT_GT(cases.size(), 20u);
  for (const json& c : cases) {
    const std::string text = c["text"];
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(t.encode(text, add_bos, parse_special), expected) << escaped(text);
    EXPECT_EQ(t.decode(expected, decode_options), c.value("decoded", text)) << escaped(text);
  }
}

TEST(Stories260KTokenizer, ZooPromptMatchesLlama2c) {
  IRON_NEEDS_STORIES();
  SKIP_WITHOUT(kStories);
  // llama2.c/llama.cpp: BOS, then "▁" "Z" "oo" (the space prefix has no merge with "Z").
  EXPECT_EQ(stories().encode("Zoo", true), (std::vector<int32_t>{1, 410, 469, 347}));
  EXPECT_EQ(stories().encode("Zoo", true),
            golden("stories260k")["zoo_with_bos"].get<std::vector<int32_t>>());
}

TEST(Stories260KTokenizer, KnownGreedyIdsDecodeToTheReferenceText) {
  IRON_NEEDS_STORIES();
  SKIP_WITHOUT(kStories);
  const json g = golden("stories260k");
  const auto ids = g["known_ids"].get<std::vector<int32_t>>();
  const std::string text = g["known_text"];
  EXPECT_EQ(stories().decode(ids), text);  // llama.cpp's pieces keep the leading space
  EXPECT_EQ(stories().decode(ids, {.strip_prefix_space = true}), text.substr(1));
  // The text without its leading space encodes back to the same ids.
  EXPECT_EQ(stories().encode(text.substr(1), false), ids);
}

TEST(Stories260KTokenizer, MatchesGoldenEncodings) {
  IRON_NEEDS_STORIES();
  SKIP_WITHOUT(kStories);
  const json g = golden("stories260k");
  ASSERT_GT(g["cases"].size(), 20u);
  for (const json& c : g["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(stories().encode(text, true), c["ids"].get<std::vector<int32_t>>()) << text;
  }
}

TEST(Stories260KTokenizer, MetadataAndRoundTrip) {
  IRON_NEEDS_STORIES();
  SKIP_WITHOUT(kStories);
  const Tokenizer& t = stories();
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.add_bos_by_default());
  EXPECT_TRUE(t.is_end(2));
  EXPECT_FALSE(t.is_end(1));
  EXPECT_EQ(t.token_text(3 + 'A'), "A");  // <0x41>
  EXPECT_EQ(t.token_text(403), " Once");
  // Characters the vocabulary lacks go through byte tokens and come back whole.
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA4\x96";
  const auto ids = t.encode(text, true);
  EXPECT_EQ(t.decode(ids, {.skip_special = true, .strip_prefix_space = true}), text);
}

TEST(SmolLM2Tokenizer, MatchesHuggingFaceTokenizers) {
  SKIP_WITHOUT(kSmolLM2);
  expect_golden_cases(smollm2(), golden("smollm2")["cases"], false, true, {});
}

TEST(SmolLM2Tokenizer, Metadata) {
  SKIP_WITHOUT(kSmolLM2);
  const Tokenizer& t = smollm2();
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_FALSE(t.add_bos_by_default());
  EXPECT_TRUE(t.is_end(*t.find_token("<|im_end|>")));
  EXPECT_TRUE(t.is_end(*t.find_token("<|endoftext|>")));
  EXPECT_FALSE(t.is_end(*t.find_token("<|im_start|>")));
  EXPECT_EQ(t.token_text(*t.find_token("\xC4\xA0the")), " the");  // "Ġthe"
  EXPECT_EQ(t.token_type(1), TokenType::control);
}

TEST(SmolLM2Tokenizer, SpecialTokensOnlyWithParseSpecial) {
  SKIP_WITHOUT(kSmolLM2);
  const Tokenizer& t = smollm2();
  EXPECT_EQ(t.encode("<|im_start|>", false), (std::vector<int32_t>{1}));
  const auto literal = t.encode("<|im_start|>", false, /*parse_special=*/false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(t.decode(literal), "<|im_start|>");
  EXPECT_EQ(t.decode({1, 2}, {.skip_special = true}), "");
}

TEST(SmolLM2Tokenizer, ChatTemplateMatchesJinja) {
  SKIP_WITHOUT(kSmolLM2);
  const json chat = golden("smollm2")["chat"];
  ASSERT_TRUE(chat.is_object()) << "golden made without jinja2";
  std::vector<ChatMessage> messages;
  for (const json& m : chat["messages"]) messages.push_back({m["role"], m["content"]});
  EXPECT_EQ(smollm2().apply_chat_template(messages), chat["rendered"].get<std::string>());
  // With a system message of its own, no default one is added.
  EXPECT_EQ(smollm2().apply_chat_template({{"system", "S"}, {"user", "U"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(SmolLM2Tokenizer, StreamingNeverSplitsACharacter) {
  SKIP_WITHOUT(kSmolLM2);
  const std::string text =
      "emoji \xF0\x9F\xA4\x96\xF0\x9F\x8E\x89 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E!";
  const auto ids = smollm2().encode(text, false);
  StreamDecoder stream(smollm2());
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(detail::is_valid_utf8(piece)) << "after id " << id;
    out += piece;
  }
  out += stream.flush();
  EXPECT_EQ(out, text);
}

// Writes SmolLM2's vocabulary as a Hugging Face tokenizer.json (merges in both spellings) and
// checks the loader gives the same tokenizer.
TEST(SmolLM2Tokenizer, HuggingFaceTokenizerJsonLoadsTheSameTokenizer) {
  SKIP_WITHOUT(kSmolLM2);
  const TokenizerData d = tokenizer_data_from_gguf(io::GgufFile::open(kSmolLM2));
  for (const bool pair_merges : {false, true}) {
    json vocab = json::object();
    json added = json::array();
    for (size_t i = 0; i < d.tokens.size(); ++i) {
      vocab[d.tokens[i]] = i;
      if (d.token_types[i] == 3) {
        added.push_back({{"id", i}, {"content", d.tokens[i]}, {"special", true}});
      }
    }
    json merges = json::array();
    for (const std::string& m : d.merges) {
      const size_t space = m.find(' ', 1);
      if (pair_merges) {
        merges.push_back(json::array({m.substr(0, space), m.substr(space + 1)}));
      } else {
        merges.push_back(m);
      }
    }
    const json root = {
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           json::array(
               {{{"type", "Digits"}, {"individual_digits", true}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    const auto dir = std::filesystem::temp_directory_path() /
                     ("iron_hf_json_test_" + std::to_string(::getpid()) + "_" + std::to_string(pair_merges));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << root.dump();
    std::ofstream(dir / "tokenizer_config.json") << json{
        {"eos_token", "<|im_end|>"},
        {"bos_token", "<|im_start|>"},
        {"chat_template", *d.chat_template}}.dump();
    const Tokenizer t = from_hf_tokenizer_json((dir / "tokenizer.json").string());
    std::filesystem::remove_all(dir);
    EXPECT_EQ(t.vocab_size(), 49152);
    EXPECT_EQ(t.eos_id(), 2);
    EXPECT_EQ(t.bos_id(), 1);
    const json cases = golden("smollm2")["cases"];  // a named copy: it must outlive the loop
    for (const json& c : cases) {
      EXPECT_EQ(t.encode(c["text"].get<std::string>(), false),
                c["ids"].get<std::vector<int32_t>>());
    }
  }
}

TEST(Gemma3Tokenizer, MatchesSentencePiece) {
  SKIP_WITHOUT(kGemma3);
  const json g = golden("gemma3");
  ASSERT_GE(g["cases"].size(), 150u);
  // BOS first (add_bos_token), control tokens written in the text as plain text, as llama.cpp's
  // tokenize(text, add_bos=True, special=False) which the golden was checked against.
  expect_golden_cases(gemma3(), g["cases"], true, false, {.skip_special = true});
  EXPECT_GE(g["llama_cpp_check"]["cases_equal"].get<int>(), 20);
}

TEST(Gemma3Tokenizer, Metadata) {
  SKIP_WITHOUT(kGemma3);
  const Tokenizer& t = gemma3();
  EXPECT_EQ(t.vocab_size(), 262144);
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_TRUE(t.add_bos_by_default());
  EXPECT_TRUE(t.is_end(1));
  EXPECT_TRUE(t.is_end(*t.find_token("<end_of_turn>")));
  EXPECT_FALSE(t.is_end(*t.find_token("<start_of_turn>")));
  EXPECT_EQ(t.token_type(*t.find_token("<table>")), TokenType::user_defined);
  // No space prefix: "Hello" and " Hello" are different tokens.
  EXPECT_NE(t.encode("Hello", false), t.encode(" Hello", false));
  EXPECT_EQ(t.encode("<start_of_turn>", false), (std::vector<int32_t>{105}));
}

// Qwen2.5 (scripts/fetch-model.sh qwen0.5b): 230 texts (code, CJK, emoji, every special token,
// whitespace and digit runs, random strings) as Hugging Face `tokenizers` encodes them with the
// GGUF's vocabulary, merges and Qwen2's pre-tokenizer regex; special tokens parsed, no BOS. The
// golden was also checked against llama.cpp's tokenize(text, add_bos=False, special=True) on the
// same file: every case equal.
TEST(Qwen2Tokenizer, MatchesHuggingFaceTokenizersAndLlamaCpp) {
  SKIP_WITHOUT(kQwen2);
  const json g = golden("qwen2");
  ASSERT_GE(g["cases"].size(), 150u);
  expect_golden_cases(qwen2(), g["cases"], false, true, {});
  EXPECT_EQ(g["llama_cpp_check"]["cases_equal"].get<size_t>(), g["cases"].size()) << g["llama_cpp_check"].dump();
}

TEST(Qwen2Tokenizer, Metadata) {
  SKIP_WITHOUT(kQwen2);
  const Tokenizer& t = qwen2();
  EXPECT_EQ(t.vocab_size(), 151936);
  EXPECT_EQ(t.eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(t.bos_id(), 151643);  // <|endoftext|>
  EXPECT_FALSE(t.add_bos_by_default());
  EXPECT_TRUE(t.is_end(*t.find_token("<|im_end|>")));
  EXPECT_TRUE(t.is_end(*t.find_token("<|endoftext|>")));
  EXPECT_FALSE(t.is_end(*t.find_token("<|im_start|>")));
  EXPECT_EQ(t.token_type(*t.find_token("<tool_call>")), TokenType::user_defined);
  EXPECT_EQ(t.token_type(151665), TokenType::unused);  // [PAD151665], padding the matrix to 151936
  EXPECT_EQ(t.token_text(*t.find_token("\xC4\xA0the")), " the");  // "Ġthe"
  // Qwen2's pre-tokenizer takes digits one at a time (GPT-2's takes runs).
  EXPECT_EQ(t.encode("2024", false).size(), 4u);
}

TEST(Qwen2Tokenizer, ControlTokensOnlyWithParseSpecialUserDefinedAlways) {
  SKIP_WITHOUT(kQwen2);
  const Tokenizer& t = qwen2();
  const int32_t im_start = *t.find_token("<|im_start|>"), tool_call = *t.find_token("<tool_call>");
  EXPECT_EQ(t.encode("<|im_start|>", false), (std::vector<int32_t>{im_start}));
  const auto literal = t.encode("<|im_start|>", false, /*parse_special=*/false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(t.decode(literal), "<|im_start|>");
  // A user-defined token (not special in Qwen's tokenizer.json) is one token either way.
  EXPECT_EQ(t.encode("<tool_call>", false, false), (std::vector<int32_t>{tool_call}));
  // An unused padding token's text is plain text.
  EXPECT_GT(t.encode("[PAD151665]", false).size(), 1u);
  EXPECT_EQ(t.decode({im_start, 151645, 151643}, {.skip_special = true}), "");
}

// Each conversation of the golden as jinja2 renders Qwen2.5's template (the default system
// message "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." where the first
// message is not a system one, a later system message as a turn of its own).
TEST(Qwen2Tokenizer, ChatTemplateMatchesJinja) {
  SKIP_WITHOUT(kQwen2);
  const json chats = golden("qwen2")["chats"];
  ASSERT_GE(chats.size(), 5u);
  for (const json& chat : chats) {
    std::vector<ChatMessage> messages;
    for (const json& m : chat["messages"]) messages.push_back({m["role"], m["content"]});
    EXPECT_EQ(qwen2().apply_chat_template(messages, chat["add_generation_prompt"].get<bool>()),
              chat["rendered"].get<std::string>())
        << chat["messages"].dump();
  }
  EXPECT_EQ(recognise_chat_template(qwen2().chat_template()), ChatFormat::chatml);
}

// Qwen2's vocabulary as a Hugging Face tokenizer.json as Qwen writes it (an NFC normalizer, its
// Split regex and ByteLevel, control tokens special and the user-defined ones not) encodes as
// `tokenizers` does with that normalizer: as the GGUF's tokenizer, but where NFC changes a text
// (ids_nfc in the golden).
TEST(Qwen2Tokenizer, HuggingFaceTokenizerJsonLoadsTheSameTokenizer) {
  SKIP_WITHOUT(kQwen2);
  const TokenizerData d = tokenizer_data_from_gguf(io::GgufFile::open(kQwen2));
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    if (d.token_types[i] == 1) vocab[d.tokens[i]] = i;
    if (d.token_types[i] == 3 || d.token_types[i] == 4)
      added.push_back({{"id", i}, {"content", d.tokens[i]}, {"special", d.token_types[i] == 3}});
  }
  const json root = {
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern",
                        {{"Regex",
                          "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                          "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", d.merges}}}};
  const auto dir = std::filesystem::temp_directory_path() / ("iron_hf_qwen2_json_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << root.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << json{{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}, {"chat_template", *d.chat_template}}.dump();
  const Tokenizer t = from_hf_tokenizer_json((dir / "tokenizer.json").string());
  std::filesystem::remove_all(dir);
  // The 271 unused padding rows are not in a tokenizer.json: its vocabulary ends at 151664.
  EXPECT_EQ(t.vocab_size(), 151665);
  EXPECT_EQ(t.eos_id(), 151645);
  const json cases = golden("qwen2")["cases"];
  int normalised = 0;
  for (const json& c : cases) {
    normalised += c.contains("ids_nfc");
    EXPECT_EQ(t.encode(c["text"].get<std::string>(), false),
              c.value("ids_nfc", c["ids"]).get<std::vector<int32_t>>())
        << escaped(c["text"].get<std::string>());
  }
  EXPECT_GE(normalised, 5);
}

// An encoder's input (Tokenizer::encode_sentence) for every golden case, the cut at the
// golden's max_seq_length exercised.
void expect_sentence_golden(const std::string& tokenizer_json, const std::string& name) {
  const Tokenizer t = from_hf_tokenizer_json(tokenizer_json);
  const json g = golden(name);
  const size_t max_len = g["max_seq_length"];
  ASSERT_GE(g["cases"].size(), 150u);
  size_t truncated = 0;
  for (const auto& c : g["cases"]) {
    const std::string text = c["text"];
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    truncated += expected.size() == max_len;
    EXPECT_EQ(t.encode_sentence(text, max_len), expected) << escaped(text);
  }
  EXPECT_GE(truncated, 2u);
}

TEST(EncoderTokenizers, MiniLMMatchesHuggingFaceTokenizers) {
  const std::string path = io::testing::local_model_path("all-MiniLM-L6-v2/tokenizer.json");
  SKIP_WITHOUT(path);
  expect_sentence_golden(path, "minilm");
}

// Gemma's SentencePiece model in Hugging Face's form: merges by rank, byte fallback, spaces as
// U+2581, its added tokens (new lines, runs of U+2581, HTML tags) matched literally.
TEST(EncoderTokenizers, EmbeddingGemmaMatchesHuggingFaceTokenizers) {
  const std::string path = io::testing::local_model_path("embeddinggemma-300m/tokenizer.json");
  SKIP_WITHOUT(path);
  expect_sentence_golden(path, "embeddinggemma");
}

}  // namespace
}  // namespace iron::text
