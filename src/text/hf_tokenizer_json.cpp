// Hugging Face tokenizer.json (and tokenizer_config.json): byte-level BPE models, SentencePiece
// BPE models in Hugging Face's form (Gemma's) and WordPiece models.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "iron/error.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::text {
namespace {

using nlohmann::json;

std::string type_of(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

// The Split patterns of Llama 3 and Qwen2 tokenizer.json files (followed by a ByteLevel
// pre-tokenizer without its own regex).
const char* const kLlama3Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

/// The pre-tokenizer name this library knows for a tokenizer.json pre_tokenizer.
std::string pre_tokenizer_name(const json& pre) {
  const auto byte_level_with_regex = [](const json& p) {
    return type_of(p) == "ByteLevel" && p.value("use_regex", true) &&
           !p.value("add_prefix_space", false);
  };
  if (byte_level_with_regex(pre)) return "gpt2";
  if (type_of(pre) == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2) {
    const json& first = pre["pretokenizers"][0];
    if (type_of(first) == "Digits" && first.value("individual_digits", false) &&
        byte_level_with_regex(pre["pretokenizers"][1])) {
      return "smollm";
    }
    const json& second = pre["pretokenizers"][1];
    if (type_of(first) == "Split" && type_of(second) == "ByteLevel" &&
        !second.value("use_regex", true) && first.contains("pattern") &&
        first["pattern"].is_object() && first["pattern"].value("Regex", "") != "" &&
        first.value("behavior", "") == "Isolated" && !first.value("invert", false)) {
      const std::string pattern = first["pattern"].value("Regex", "");
      if (pattern == kLlama3Pattern) return "llama-bpe";
      if (pattern == kQwen2Pattern) return "qwen2";
    }
  }
  value_error(
      "tokenizer.json: unsupported pre_tokenizer " + escaped(pre.dump(), 200) +
      " (supported: ByteLevel, Digits(individual_digits) + ByteLevel, the Llama 3 and Qwen2 "
      "Split patterns + ByteLevel)");
}

/// A token named in tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

/// A token id as the file writes it: an integer (a float such as 2.5e21 is refused, not cast:
/// converting an out-of-range double to an integer is undefined); a huge one saturates, so the
/// caller's range check refuses it.
int64_t token_id(const json& id) {
  if (id.is_number_unsigned()) return int64_t(std::min<uint64_t>(id.get<uint64_t>(), INT64_MAX));
  if (!id.is_number_integer())
    value_error("tokenizer.json: token id " + escaped(id.dump(), 40) + " is not an integer");
  return id.get<int64_t>();
}

/// A post-processor's special token: TemplateProcessing's {"SpecialToken": {"id": NAME}} item,
/// looked up in its special_tokens table, or BertProcessing's [NAME, ID] pair; its one id.
int64_t post_processor_token(const json& post, const json& item, const char* what) {
  if (item.is_array() && item.size() == 2 && item[1].is_number()) return token_id(item[1]);
  if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
    const std::string name = item["SpecialToken"].value("id", "");
    const json& table = post.value("special_tokens", json::object());
    if (table.is_object() && table.contains(name) && table[name].is_object()) {
      const json& ids = table[name].value("ids", json::array());
      if (ids.is_array() && ids.size() == 1) return token_id(ids[0]);
    }
  }
  value_error(std::string("tokenizer.json: the post_processor's ") + what +
              " token is not one special token with one id");
}

/// Whether `j` is a pattern of exactly the string `text` ({"String": text}).
bool string_pattern(const json& j, const char* text) {
  return j.is_object() && j.contains("pattern") && j["pattern"].is_object() &&
         j["pattern"].contains("String") && j["pattern"]["String"] == text;
}

/// A SentencePiece model in Hugging Face's form (Gemma's tokenizer.json): a BPE model with byte
/// fallback whose normalizer writes spaces as U+2581. Its pre-tokenizer, when present, splits at
/// spaces, of which the normalised text has none; the model is run over the whole of it.
void check_metaspace_bpe(const json& root) {
  const json normalizer = root.value("normalizer", json());
  if (!(type_of(normalizer) == "Replace" && string_pattern(normalizer, " ") &&
        normalizer.value("content", "") == "\u2581")) {
    value_error("tokenizer.json: a BPE model with byte_fallback needs the normalizer that writes spaces as "
                "U+2581 (Replace \" \" by \"\u2581\"), found " + escaped(normalizer.dump(), 200));
  }
  const json pre = root.value("pre_tokenizer", json());
  if (!pre.is_null() && !(type_of(pre) == "Split" && string_pattern(pre, " ") && !pre.value("invert", false))) {
    value_error("tokenizer.json: a BPE model with byte_fallback takes no pre_tokenizer or a Split at spaces, not " +
                escaped(pre.dump(), 200));
  }
}

/// A WordPiece (BERT) tokenizer.json: vocab, [UNK], BertNormalizer, BertPreTokenizer and a
/// post-processor that wraps one sequence in [CLS] ... [SEP].
TokenizerData read_wordpiece(const json& root) {
  const json& model = root["model"];
  TokenizerData data;
  data.model = "wordpiece";
  WordPieceOptions& o = data.wordpiece;
  o.prefix = model.value("continuing_subword_prefix", "##");
  const json& max_chars = model.value("max_input_chars_per_word", json(100));
  const int64_t max = token_id(max_chars);
  if (max < 1) value_error("tokenizer.json: max_input_chars_per_word must be positive");
  o.max_chars_per_word = size_t(max);

  const json normalizer = root.value("normalizer", json());
  if (type_of(normalizer) != "BertNormalizer") {
    value_error("tokenizer.json: a WordPiece model needs the BertNormalizer (found " +
                escaped(normalizer.is_null() ? "none" : type_of(normalizer)) + ")");
  }
  const auto flag = [&](const char* key, bool fallback) {
    if (!normalizer.contains(key) || normalizer[key].is_null()) return fallback;
    if (!normalizer[key].is_boolean()) {
      value_error(std::string("tokenizer.json: BertNormalizer's ") + key + " is not a boolean");
    }
    return normalizer[key].get<bool>();
  };
  o.clean_text = flag("clean_text", true);
  o.chinese_chars = flag("handle_chinese_chars", true);
  o.lowercase = flag("lowercase", true);
  o.strip_accents = flag("strip_accents", o.lowercase);  // null: follow lowercase, as BERT does
  const json pre = root.value("pre_tokenizer", json());
  if (type_of(pre) != "BertPreTokenizer") {
    value_error("tokenizer.json: a WordPiece model needs the BertPreTokenizer (found " +
                escaped(pre.dump(), 100) + ")");
  }

  // The vocabulary: ids dense from 0, as in the BPE reader; added tokens must repeat entries.
  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) value_error("tokenizer.json: the WordPiece vocab is not an object");
  std::vector<std::optional<std::string>> by_id(vocab.size());
  for (const auto& [text, id_json] : vocab.items()) {
    const int64_t id = token_id(id_json);
    if (id < 0 || size_t(id) >= by_id.size()) {
      value_error("tokenizer.json: WordPiece token id " + std::to_string(id) +
                  " is outside the vocabulary of " + std::to_string(by_id.size()));
    }
    by_id[size_t(id)] = text;
  }
  for (size_t i = 0; i < by_id.size(); ++i) {
    if (!by_id[i]) value_error("tokenizer.json: no token has id " + std::to_string(i));
    data.tokens.push_back(std::move(*by_id[i]));
  }
  data.token_types.assign(data.tokens.size(), int32_t(TokenType::normal));
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& added : root["added_tokens"]) {
      const int64_t id = token_id(added.at("id"));
      const std::string content = added.at("content").get<std::string>();
      if (id < 0 || size_t(id) >= data.tokens.size() || data.tokens[size_t(id)] != content) {
        value_error("tokenizer.json: added token \"" + escaped(content) +
                    "\" is not the vocabulary's entry at its id");
      }
      data.token_types[size_t(id)] =
          int32_t(added.value("special", false) ? TokenType::control : TokenType::user_defined);
    }
  }
  const std::string unk = model.value("unk_token", "[UNK]");
  for (size_t i = 0; i < data.tokens.size(); ++i) {
    if (data.tokens[i] == unk) data.unk_id = int32_t(i);
  }
  if (!data.unk_id) value_error("tokenizer.json: the unknown token \"" + escaped(unk) + "\" is not in the vocabulary");

  const json post = root.value("post_processor", json());
  int64_t cls = -1, sep = -1;
  if (type_of(post) == "BertProcessing") {
    cls = post_processor_token(post, post.value("cls", json()), "[CLS]");
    sep = post_processor_token(post, post.value("sep", json()), "[SEP]");
  } else if (type_of(post) == "TemplateProcessing") {
    const json& single = post.value("single", json());
    if (!single.is_array() || single.size() != 3 || !single[1].is_object() ||
        !single[1].contains("Sequence")) {
      value_error("tokenizer.json: the post_processor's single template is not [CLS] $A [SEP]");
    }
    cls = post_processor_token(post, single[0], "first");
    sep = post_processor_token(post, single[2], "last");
  } else {
    value_error("tokenizer.json: a WordPiece model needs a BertProcessing or TemplateProcessing "
                "post_processor (found " + escaped(type_of(post)) + ")");
  }
  if (cls < 0 || sep < 0 || size_t(cls) >= data.tokens.size() ||
      size_t(sep) >= data.tokens.size()) {
    value_error("tokenizer.json: the post_processor's [CLS] or [SEP] id is outside the vocabulary");
  }
  data.bos_id = int32_t(cls);
  data.eos_id = int32_t(sep);
  data.add_bos = false;
  data.add_space_prefix = false;
  return data;
}

}  // namespace

TokenizerData read_hf_tokenizer_json(const std::string& path) {
  const json root = io::read_json_file(path);
  try {
    if (!root.is_object() || !root.contains("model")) {
      value_error("tokenizer.json: " + escaped_path(path) + " has no \"model\"");
    }
    const json& model = root["model"];
    const std::string kind = type_of(model);
    if (kind == "WordPiece") return read_wordpiece(root);
    if (kind != "BPE") {
      value_error("tokenizer.json: unsupported model type \"" + escaped(kind) +
                  "\" (BPE or WordPiece)");
    }
    const json& byte_fallback = model.value("byte_fallback", json(false));
    const bool metaspace = byte_fallback.is_boolean() && byte_fallback.get<bool>();
    // NFC (Qwen2's) is the one normaliser a byte-level model may have here.
    const bool nfc = type_of(root.value("normalizer", json())) == "NFC";
    if (metaspace) {
      check_metaspace_bpe(root);
    } else if (root.contains("normalizer") && !root["normalizer"].is_null() && !nfc) {
      value_error("tokenizer.json: a byte-level BPE model takes no normalizer but NFC (found " +
                  escaped(type_of(root["normalizer"])) + ")");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
        value_error(std::string("tokenizer.json: BPE ") + key + " is not supported");
      }
    }
    TokenizerData data;
    data.model = metaspace ? "metaspace-bpe" : "gpt2";
    if (!metaspace) data.pre = pre_tokenizer_name(root.value("pre_tokenizer", json()));
    data.add_space_prefix = false;
    data.ignore_merges = model.value("ignore_merges", false);
    data.nfc = nfc;

    std::vector<std::optional<std::string>> by_id;
    std::vector<int32_t> types;
    // Ids are dense (0..n-1 over the vocab and the added tokens, which may repeat vocab entries),
    // so an id at or past their count means some smaller id has no token: that is reported
    // below, and such an id is never used to size by_id (a tiny file could ask for 2^31 slots).
    const json& vocab = model.at("vocab");
    const json no_added = json::array();
    const json& added_tokens = root.contains("added_tokens") && root["added_tokens"].is_array()
                                   ? root["added_tokens"]
                                   : no_added;
    const int64_t max_tokens = int64_t(vocab.size() + added_tokens.size());
    bool id_past_count = false;
    const auto place = [&](const std::string& text, int64_t id, TokenType type) {
      if (id < 0 || id > INT32_MAX) value_error("tokenizer.json: token id out of range");
      if (id >= max_tokens) {
        id_past_count = true;
        return;
      }
      if (size_t(id) >= by_id.size()) {
        by_id.resize(size_t(id) + 1);
        types.resize(size_t(id) + 1, int32_t(TokenType::normal));
      }
      by_id[size_t(id)] = text;
      types[size_t(id)] = int32_t(type);
    };
    for (const auto& [text, id] : vocab.items()) {
      place(text, token_id(id), TokenType::normal);
    }
    for (const json& added : added_tokens) {
      const bool special = added.value("special", false);
      place(added.at("content").get<std::string>(), token_id(added.at("id")),
            special ? TokenType::control : TokenType::user_defined);
    }
    if (id_past_count) by_id.resize(size_t(max_tokens) + 1);  // the gap is at or below the count
    for (size_t i = 0; i < by_id.size(); ++i) {
      if (!by_id[i]) value_error("tokenizer.json: no token has id " + std::to_string(i));
      data.tokens.push_back(std::move(*by_id[i]));
    }
    data.token_types = std::move(types);
    // Byte fallback's tokens are the vocabulary's <0xNN> entries.
    if (metaspace)
      for (size_t i = 0; i < data.tokens.size(); ++i) {
        const std::string& t = data.tokens[i];
        if (data.token_types[i] == int32_t(TokenType::normal) && t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>')
          data.token_types[i] = int32_t(TokenType::byte);
      }
    for (const json& merge : model.at("merges")) {
      if (merge.is_string()) {
        data.merges.push_back(merge.get<std::string>());
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        data.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      } else {
        value_error("tokenizer.json: a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }

    const std::filesystem::path config_path =
        std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (std::filesystem::exists(config_path, ec)) {
      const json config = io::read_json_file(config_path.string());
      const auto id_of = [&](const std::optional<std::string>& text) -> std::optional<int32_t> {
        if (!text) return std::nullopt;
        for (size_t i = 0; i < data.tokens.size(); ++i) {
          if (data.tokens[i] == *text) return int32_t(i);
        }
        return std::nullopt;
      };
      data.bos_id = id_of(config_token(config, "bos_token"));
      data.eos_id = id_of(config_token(config, "eos_token"));
      data.unk_id = id_of(config_token(config, "unk_token"));
      data.pad_id = id_of(config_token(config, "pad_token"));
      if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
        data.add_bos = config["add_bos_token"].get<bool>();
      }
      if (config.contains("chat_template") && config["chat_template"].is_string()) {
        data.chat_template = config["chat_template"].get<std::string>();
      }
    }
    // What a sentence is wrapped in (an encoder's input) is the post-processor's to say.
    const json post = root.value("post_processor", json());
    if (metaspace && type_of(post) == "TemplateProcessing") {
      const json& single = post.value("single", json());
      if (!single.is_array() || single.size() != 3 || !single[1].is_object() || !single[1].contains("Sequence"))
        value_error("tokenizer.json: the post_processor's single template is not <bos> $A <eos>");
      const int64_t first = post_processor_token(post, single[0], "first"),
                    last = post_processor_token(post, single[2], "last");
      if (first < 0 || last < 0 || size_t(first) >= data.tokens.size() || size_t(last) >= data.tokens.size())
        value_error("tokenizer.json: the post_processor's first or last id is outside the vocabulary");
      data.bos_id = int32_t(first);
      data.eos_id = int32_t(last);
    }
    return data;
  } catch (const json::exception& e) {
    value_error("tokenizer.json: " + escaped_path(path) + " is malformed: " + escaped(e.what()));
  }
}

Tokenizer from_hf_tokenizer_json(const std::string& path) {
  return Tokenizer::build(read_hf_tokenizer_json(path));
}

}  // namespace iron::text
