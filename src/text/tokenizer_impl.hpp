// The tokenizer's tables and the model-specific encoders (internal).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "iron/text/tokenizer.hpp"

namespace iron::text {

// sentencepiece_bpe merges by score (GGUF "llama" vocabularies); metaspace_bpe is the same kind of
// model in Hugging Face's form (spaces as U+2581, merges by rank, byte fallback: Gemma's
// tokenizer.json).
enum class ModelKind { sentencepiece_bpe, metaspace_bpe, byte_level_bpe, wordpiece };
enum class PreTokenizerKind { none, gpt2, smollm, llama3, qwen2 };

/// A gpt2 merge: the pair (left, right) becomes `result`; lower rank merges first.
struct MergeRule {
  int32_t rank;
  int32_t result;
};

struct Tokenizer::Impl {
  ModelKind kind = ModelKind::sentencepiece_bpe;
  PreTokenizerKind pre = PreTokenizerKind::none;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::vector<std::string> texts;                  // the bytes each token stands for
  std::unordered_map<std::string, int32_t> id_of;  // vocabulary string -> first id with it
  std::optional<int32_t> bos, eos, unk, pad;
  bool add_bos = false;
  bool add_space_prefix = false;
  bool ignore_merges = false;
  bool nfc = false;  // byte-level text normalised to NFC before it is pre-tokenised
  std::optional<std::string> chat_template;
  std::vector<int32_t> end_ids;

  // Tokens matched whole in the text, by their first byte (for SentencePiece user-defined pieces
  // starting with a space, also U+2581's first byte), longest first.
  std::array<std::vector<int32_t>, 256> specials_by_first_byte;

  // SentencePiece: pieces BPE may produce (normal and user-defined tokens), byte fallback ids.
  std::unordered_map<std::string, int32_t> piece_id;
  std::array<int32_t, 256> byte_token{};  // -1 when the vocabulary lacks <0xNN>

  // Byte-level and metaspace BPE: the token of each byte's character (byte-level), and the
  // merges by (left, right) ids.
  std::array<int32_t, 256> byte_char_token{};  // -1 when missing
  std::unordered_map<uint64_t, MergeRule> merges;

  // WordPiece: the settings; pieces are looked up in id_of.
  WordPieceOptions wordpiece;

  // Words already encoded (byte-level BPE); encode() is const and may run on many threads.
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> word_cache;

  void check_id(int32_t id) const;
  /// The length of special token `id` written in `text` at `i`, or 0 when it is not there.
  size_t match_special(std::string_view text, size_t i, int32_t id) const;

  using DecodeState = detail::DecodeState;
  /// The bytes `id` adds to decoded text (checks the id).
  std::string_view decode_piece(int32_t id, const DecodeOptions& options, DecodeState& state) const;
  /// Appends the ids of a stretch of text holding no special tokens.
  void encode_sentencepiece(std::string_view text, std::vector<int32_t>& out) const;
  /// Text whose spaces are already U+2581: each character's token (its UTF-8 bytes' <0xNN>
  /// tokens when the vocabulary lacks it), then merge_by_rank.
  void encode_metaspace(std::string_view text, std::vector<int32_t>& out) const;
  void encode_byte_level(std::string_view text, std::vector<int32_t>& out) const;
  void encode_byte_level_word(std::string_view word, std::vector<int32_t>& out) const;
  /// Applies the merges to `ids`, lowest rank first and leftmost on ties, as Hugging Face's BPE.
  void merge_by_rank(std::vector<int32_t>& ids) const;
  void encode_wordpiece(std::string_view text, std::vector<int32_t>& out) const;
  void encode_wordpiece_word(std::string_view word, std::vector<int32_t>& out) const;
};

/// BERT's normaliser (the WordPieceOptions flags) over UTF-8 text; invalid bytes become U+FFFD
/// first, which clean_text then drops as Hugging Face drops it.
std::string bert_normalize(std::string_view text, const WordPieceOptions& options);
/// BERT's pre-tokeniser: words split at white space (dropped) and around each punctuation
/// character (kept as a word of its own).
std::vector<std::string_view> bert_pretokenize(std::string_view normalized);

/// Splits text into the words byte-level BPE merges within (gpt2's regex, by hand).
std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizerKind kind);

}  // namespace iron::text
