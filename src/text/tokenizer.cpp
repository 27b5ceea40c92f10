// Building a tokenizer from untrusted data, the model-independent parts of encoding (BOS and
// special tokens written in the text), decoding and streaming.
#include <algorithm>

#include "iron/error.hpp"
#include "text/nfc.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

const std::string kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

/// "<0x41>" -> 0x41, or -1 when the string is not a byte token.
int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int value = 0;
  for (const char c : s.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

/// A byte-level token's bytes: each character maps back to its byte; a character outside the
/// alphabet (a malformed vocabulary) keeps its own UTF-8 bytes rather than failing.
std::string byte_level_bytes(std::string_view token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const detail::Utf8Unit u = detail::decode_utf8(token, i);
    const int b = u.valid ? detail::unicode_to_byte(u.cp) : -1;
    if (b >= 0) {
      out += char(b);
    } else {
      out.append(token.substr(i, u.len));
    }
    i += u.len;
  }
  return out;
}

bool is_special_type(TokenType t) {
  return t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined;
}

void check_optional_id(const std::optional<int32_t>& id, const char* what, size_t n) {
  if (id && (*id < 0 || size_t(*id) >= n)) {
    value_error(std::string("tokenizer: ") + what + " id " + std::to_string(*id) +
                " is outside the vocabulary of " + std::to_string(n) + " tokens");
  }
}

void build_merges(Tokenizer::Impl& t, const std::vector<std::string>& merges) {
  t.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // Split at the first space after the first byte, as llama.cpp does.
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= m.size()) {
      value_error("tokenizer: merge " + std::to_string(rank) + " \"" + escaped(m) +
                  "\" is not two tokens separated by a space");
    }
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const auto find = [&](const std::string& s) {
      const auto it = t.id_of.find(s);
      if (it == t.id_of.end()) {
        value_error("tokenizer: merge " + std::to_string(rank) + " \"" + escaped(m) +
                    "\" refers to \"" + escaped(s) + "\", which is not a token");
      }
      return it->second;
    };
    const int32_t a = find(left), b = find(right), result = find(left + right);
    const uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    t.merges.emplace(key, MergeRule{int32_t(rank), result});  // a repeated pair keeps its best rank
  }
}

}  // namespace

Tokenizer Tokenizer::build(TokenizerData data) {
  auto impl = std::make_shared<Impl>();
  Impl& t = *impl;
  const size_t n = data.tokens.size();
  if (n == 0) value_error("tokenizer: the vocabulary is empty");
  if (n > size_t(INT32_MAX)) value_error("tokenizer: the vocabulary is too large");
  if (data.model == "llama") {
    t.kind = ModelKind::sentencepiece_bpe;
  } else if (data.model == "metaspace-bpe") {
    t.kind = ModelKind::metaspace_bpe;
  } else if (data.model == "gpt2") {
    t.kind = ModelKind::byte_level_bpe;
  } else if (data.model == "wordpiece") {
    t.kind = ModelKind::wordpiece;
  } else {
    value_error("tokenizer: unsupported tokenizer model \"" + escaped(data.model) +
                "\" (supported: llama, metaspace-bpe, gpt2, wordpiece)");
  }
  if (t.kind == ModelKind::wordpiece) {
    if (!data.unk_id) value_error("tokenizer: a WordPiece model needs an unknown token");
    if (data.wordpiece.prefix.empty()) {
      value_error("tokenizer: WordPiece's continuing_subword_prefix is empty");
    }
    if (data.wordpiece.max_chars_per_word == 0) {
      value_error("tokenizer: WordPiece's max_input_chars_per_word is 0");
    }
    t.wordpiece = data.wordpiece;
  }
  if (t.kind == ModelKind::byte_level_bpe) {
    if (data.pre == "gpt2") {
      t.pre = PreTokenizerKind::gpt2;
    } else if (data.pre == "smollm") {
      t.pre = PreTokenizerKind::smollm;
    } else if (data.pre == "llama-bpe" || data.pre == "llama3") {
      t.pre = PreTokenizerKind::llama3;
    } else if (data.pre == "qwen2") {
      t.pre = PreTokenizerKind::qwen2;
    } else {
      value_error("tokenizer: unsupported pre-tokenizer \"" + escaped(data.pre) +
                  "\" for a gpt2 tokenizer (supported: gpt2, smollm, llama-bpe, qwen2)");
    }
  }
  if (!data.scores.empty() && data.scores.size() != n) {
    value_error("tokenizer: " + std::to_string(data.scores.size()) + " scores for " +
                std::to_string(n) + " tokens");
  }
  if (!data.token_types.empty() && data.token_types.size() != n) {
    value_error("tokenizer: " + std::to_string(data.token_types.size()) + " token types for " +
                std::to_string(n) + " tokens");
  }
  check_optional_id(data.bos_id, "BOS", n);
  check_optional_id(data.eos_id, "EOS", n);
  check_optional_id(data.unk_id, "unknown-token", n);
  check_optional_id(data.pad_id, "padding", n);

  const bool spm = t.kind == ModelKind::sentencepiece_bpe;
  const bool metaspace = t.kind == ModelKind::metaspace_bpe;
  const bool wordpiece = t.kind == ModelKind::wordpiece;
  t.tokens = std::move(data.tokens);
  t.scores = data.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(data.scores);
  t.types.resize(n, TokenType::normal);
  for (size_t i = 0; i < data.token_types.size(); ++i) {
    const int32_t v = data.token_types[i];
    if (v < 1 || v > 6) {
      value_error("tokenizer: token " + std::to_string(i) + " has unknown type " +
                  std::to_string(v));
    }
    t.types[i] = TokenType(v);
  }
  t.bos = data.bos_id, t.eos = data.eos_id, t.unk = data.unk_id, t.pad = data.pad_id;
  t.add_bos = data.add_bos.value_or(spm);
  t.add_space_prefix = data.add_space_prefix.value_or(spm);
  t.ignore_merges = data.ignore_merges;
  if (data.nfc && t.kind != ModelKind::byte_level_bpe)
    value_error("tokenizer: NFC normalisation is implemented for byte-level BPE only");
  t.nfc = data.nfc;
  t.chat_template = std::move(data.chat_template);
  t.byte_token.fill(-1);
  t.byte_char_token.fill(-1);

  t.texts.resize(n);
  t.id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = int32_t(i);
    const std::string& s = t.tokens[i];
    const TokenType type = t.types[i];
    t.id_of.emplace(s, id);
    if (type == TokenType::byte) {
      const int b = parse_byte_token(s);
      if (b < 0) {
        value_error("tokenizer: byte token " + std::to_string(i) + " \"" +
                    escaped(s) + "\" is not of the form <0xNN>");
      }
      t.texts[i] = std::string(1, char(b));
      if (t.byte_token[size_t(b)] < 0) t.byte_token[size_t(b)] = id;
    } else if (type == TokenType::normal && wordpiece) {
      // A continuation piece joins the word before it; any other piece starts a word.
      const std::string& prefix = t.wordpiece.prefix;
      t.texts[i] = s.compare(0, prefix.size(), prefix) == 0 && s.size() > prefix.size()
                       ? s.substr(prefix.size())
                       : " " + s;
    } else if (type == TokenType::normal) {
      t.texts[i] = spm || metaspace ? replace_all(s, kSpaceMarker, " ") : byte_level_bytes(s);
    } else if (type == TokenType::user_defined && spm) {
      t.texts[i] = replace_all(s, kSpaceMarker, " ");
    } else {
      t.texts[i] = s;  // control, unknown, unused, byte-level added tokens: their own text
    }
    if (spm && (type == TokenType::normal || type == TokenType::user_defined)) {
      t.piece_id.emplace(s, id);
    }
    if (t.kind == ModelKind::byte_level_bpe && type == TokenType::normal) {
      const detail::Utf8Unit u = detail::decode_utf8(s, 0);
      const int b =
          (!s.empty() && u.valid && u.len == s.size()) ? detail::unicode_to_byte(u.cp) : -1;
      if (b >= 0 && t.byte_char_token[size_t(b)] < 0) t.byte_char_token[size_t(b)] = id;
    }
    if (is_special_type(type) && !s.empty()) {
      t.specials_by_first_byte[uint8_t(s[0])].push_back(id);
      // A space in a SentencePiece user-defined piece also matches a literal U+2581 (below).
      if (spm && type == TokenType::user_defined && s[0] == ' ') {
        t.specials_by_first_byte[uint8_t(kSpaceMarker[0])].push_back(id);
      }
    }
  }
  for (auto& list : t.specials_by_first_byte) {
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return t.tokens[size_t(a)].size() > t.tokens[size_t(b)].size();
    });
  }
  if (t.kind == ModelKind::byte_level_bpe || metaspace) build_merges(t, data.merges);
  if (metaspace && std::count(t.byte_token.begin(), t.byte_token.end(), -1) > 0)
    value_error("tokenizer: a BPE model with byte fallback needs all 256 byte tokens <0x00> .. <0xFF>");

  if (t.eos) t.end_ids.push_back(*t.eos);
  for (const char* end_text : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"}) {
    const auto it = t.id_of.find(end_text);
    if (it != t.id_of.end() && t.types[size_t(it->second)] == TokenType::control) {
      t.end_ids.push_back(it->second);
    }
  }
  return Tokenizer(std::move(impl));
}

size_t Tokenizer::Impl::match_special(std::string_view text, size_t i, int32_t id) const {
  const std::string& s = tokens[size_t(id)];
  if (kind != ModelKind::sentencepiece_bpe || types[size_t(id)] != TokenType::user_defined) {
    return text.compare(i, s.size(), s) == 0 ? s.size() : 0;
  }
  // SentencePiece matches user-defined pieces after writing spaces as U+2581, so a U+2581
  // already in the text is a space to them (Gemma's "▁▁" pieces take "▁ "). llama.cpp's
  // converter stores these pieces with plain spaces and llama.cpp compares bytes, so it differs
  // here; the golden follows Google's sentencepiece.
  size_t j = i;
  for (const char c : s) {
    if (j < text.size() && text[j] == c) {
      ++j;
    } else if (c == ' ' && text.compare(j, kSpaceMarker.size(), kSpaceMarker) == 0) {
      j += kSpaceMarker.size();
    } else {
      return 0;
    }
  }
  return j - i;
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || size_t(id) >= tokens.size()) {
    index_error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(tokens.size()) + " tokens");
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  if (add_bos) {
    if (!t.bos) value_error("tokenizer: BOS requested but the vocabulary has no BOS token");
    out.push_back(*t.bos);
  }
  // SentencePiece puts its space prefix in front of every stretch of text that starts the input
  // or follows a special token (llama.cpp's rule).
  bool after_special = true;
  const auto encode_text = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (t.kind == ModelKind::sentencepiece_bpe || t.kind == ModelKind::metaspace_bpe) {
      std::string s = (t.add_space_prefix && after_special) ? " " : "";
      s += piece;
      s = replace_all(s, " ", kSpaceMarker);
      if (t.kind == ModelKind::sentencepiece_bpe) {
        t.encode_sentencepiece(s, out);
      } else {
        t.encode_metaspace(s, out);
      }
    } else if (t.kind == ModelKind::wordpiece) {
      t.encode_wordpiece(piece, out);
    } else if (t.nfc) {
      t.encode_byte_level(detail::nfc(piece), out);
    } else {
      t.encode_byte_level(piece, out);
    }
    after_special = false;
  };
  // Special tokens written in the text: the longest one starting at each position, left to
  // right. User-defined tokens always count; control and unknown ones only with parse_special.
  size_t text_start = 0;
  for (size_t i = 0; i < text.size();) {
    int32_t match = -1;
    size_t match_size = 0;
    for (const int32_t id : t.specials_by_first_byte[uint8_t(text[i])]) {
      if (!parse_special && t.types[size_t(id)] != TokenType::user_defined) continue;
      match_size = t.match_special(text, i, id);
      if (match_size > 0) {
        match = id;
        break;
      }
    }
    if (match < 0) {
      ++i;
      continue;
    }
    encode_text(text.substr(text_start, i - text_start));
    out.push_back(match);
    after_special = true;
    i += match_size;
    text_start = i;
  }
  encode_text(text.substr(text_start));
  return out;
}

std::vector<int32_t> Tokenizer::encode_sentence(std::string_view text, size_t max_tokens) const {
  const Impl& t = *impl_;
  if (!t.bos || !t.eos) {
    value_error("tokenizer: encode_sentence needs the tokens a sentence begins and ends with ([CLS] and [SEP], "
                "<bos> and <eos>)");
  }
  if (max_tokens < 2) value_error("tokenizer: encode_sentence needs room for the tokens a sentence begins and ends with");
  std::vector<int32_t> ids = encode(text, /*add_bos=*/false);
  if (ids.size() > max_tokens - 2) ids.resize(max_tokens - 2);
  ids.insert(ids.begin(), *t.bos);
  ids.push_back(*t.eos);
  return ids;
}

std::string_view Tokenizer::Impl::decode_piece(int32_t id, const DecodeOptions& options,
                                               DecodeState& state) const {
  check_id(id);
  const TokenType type = types[size_t(id)];
  const bool special = type == TokenType::control || type == TokenType::unknown;
  const bool is_bos = bos && id == *bos;
  if (options.skip_special && special) {
    state.after_bos = state.first && is_bos;  // a skipped leading BOS still starts the text
    state.first = false;
    return {};
  }
  std::string_view piece = texts[size_t(id)];
  // SentencePiece drops the space its prefix added: in front of the first text token, or the
  // first one after a leading BOS.
  if (options.strip_prefix_space && add_space_prefix && (state.first || state.after_bos) &&
      !special && !piece.empty() && piece[0] == ' ') {
    piece.remove_prefix(1);
  }
  state.after_bos = state.first && is_bos;
  state.first = false;
  return piece;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const {
  // Raw bytes, without the stream's UTF-8 repair: decode() gives exactly what the tokens hold.
  std::string out;
  Impl::DecodeState state;
  for (const int32_t id : ids) out += impl_->decode_piece(id, options, state);
  return out;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->texts[size_t(id)];
}
const std::string& Tokenizer::token_string(int32_t id) const {
  impl_->check_id(id);
  return impl_->tokens[size_t(id)];
}
TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->types[size_t(id)];
}
std::optional<int32_t> Tokenizer::find_token(std::string_view token) const {
  const auto it = impl_->id_of.find(std::string(token));
  if (it == impl_->id_of.end()) return std::nullopt;
  return it->second;
}
int32_t Tokenizer::vocab_size() const { return int32_t(impl_->tokens.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos_by_default() const { return impl_->add_bos; }
bool Tokenizer::is_end(int32_t id) const {
  const auto& ends = impl_->end_ids;
  return std::find(ends.begin(), ends.end(), id) != ends.end();
}
const std::optional<std::string>& Tokenizer::chat_template() const { return impl_->chat_template; }
std::string Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt,
                                           ChatTemplateFallback fallback) const {
  const std::string bos_text = impl_->bos ? impl_->tokens[size_t(*impl_->bos)] : std::string();
  return format_chat(impl_->chat_template, messages, add_generation_prompt, fallback, bos_text);
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, const DecodeOptions& options)
    : impl_(tokenizer.impl_), options_(options) {}

std::string StreamDecoder::push(int32_t id) {
  pending_ += impl_->decode_piece(id, options_, state_);
  const size_t ready = detail::utf8_emittable_prefix(pending_);
  std::string out = detail::sanitize_utf8(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  // What is left is the start of a character that never got its last bytes: one U+FFFD.
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";
  pending_.clear();
  state_ = {};
  return out;
}

}  // namespace iron::text
