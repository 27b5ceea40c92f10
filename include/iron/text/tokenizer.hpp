// Tokenizers: SentencePiece BPE ("llama", as in llama.cpp's SPM tokenizer), GPT-2 byte-level
// BPE ("gpt2") and BERT's WordPiece ("wordpiece", for encoders), built from plain data (the arrays a GGUF file or a Hugging Face
// tokenizer.json holds), with streaming decode and ChatML chat formatting.
//
// Token data comes from model files and is untrusted: build() validates it and every id given to
// decode() is checked; text to encode may be any bytes (invalid UTF-8 falls back to byte tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iron::io {
class GgufFile;
}

namespace iron::text {

/// Token types as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,       // BOS, EOS, <|im_start|>: matched in text only when parse_special
  user_defined = 4,  // always matched as a whole in text
  unused = 5,
  byte = 6,  // SentencePiece byte fallback <0xNN>
};

/// WordPiece's settings: Hugging Face's BertNormalizer flags and the WordPiece model's.
struct WordPieceOptions {
  bool clean_text = true;     // drop control characters and U+FFFD, white space becomes ' '
  bool chinese_chars = true;  // a CJK ideograph is a word of its own
  bool strip_accents = true;  // canonical decomposition, then non-spacing marks dropped
  bool lowercase = true;
  std::string prefix = "##";  // what a word's later pieces start with
  size_t max_chars_per_word = 100;  // a longer word is [UNK] whole
};

/// Everything a tokenizer is built from.
struct TokenizerData {
  /// "llama" (SentencePiece BPE, merged by score), "metaspace-bpe" (the same in Hugging Face's
  /// form: merged by rank, byte fallback), "gpt2" (byte-level BPE) or "wordpiece"
  std::string model;
  std::string pre;    // gpt2 only: the pre-tokenizer, "gpt2", "smollm", "llama-bpe" or "qwen2"
  std::vector<std::string> tokens;
  std::vector<float> scores;         // llama: merge priority (higher merges first); may be empty
  std::vector<int32_t> token_types;  // TokenType values; empty means all normal
  std::vector<std::string> merges;   // gpt2, metaspace-bpe: "left right", best first
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  std::optional<bool> add_bos;           // default: true for llama, false for gpt2
  std::optional<bool> add_space_prefix;  // default: true for llama, false for gpt2
  bool ignore_merges = false;  // gpt2: a word that is a whole token is not merged (HF's flag)
  /// gpt2: the text between special tokens is put in Unicode NFC first (a tokenizer.json's NFC
  /// normalizer, Qwen2's; llama.cpp does not normalise, so a GGUF's tokenizer never does).
  bool nfc = false;
  std::optional<std::string> chat_template;
  // wordpiece: bos_id and eos_id are the post-processor's [CLS] and [SEP], unk_id is required;
  // metaspace-bpe: the post-processor's first and last tokens when it has them.
  WordPieceOptions wordpiece;
};

struct DecodeOptions {
  /// Drop control and unknown tokens (BOS, <|im_end|>) instead of writing their text.
  bool skip_special = false;
  /// SentencePiece's own decoding: drop the space the prefix added in front of the first text
  /// token (after a leading BOS). Off by default, which gives llama.cpp's token-by-token pieces
  /// (llama_token_to_piece with no stripping): stories260K's greedy ids decode to " Once upon".
  bool strip_prefix_space = false;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

/// What to do when the model's chat template is not one this library can render.
enum class ChatTemplateFallback {
  error,   // throw, naming the template
  chatml,  // format as plain ChatML anyway
};

namespace detail {
/// Where decoding stands, for the leading-space rule of DecodeOptions::strip_prefix_space.
struct DecodeState {
  bool first = true;
  bool after_bos = false;
};
}  // namespace detail

class Tokenizer {
 public:
  /// Validates the data (ids in range, merges over existing tokens, known model and
  /// pre-tokenizer, byte tokens well formed) and prepares the lookup tables.
  static Tokenizer build(TokenizerData data);

  /// Token ids for `text`; `add_bos` puts BOS first (an error when the model has none).
  /// With `parse_special`, control tokens written literally ("<|im_start|>") become single
  /// tokens; user-defined tokens always do.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = true) const;

  /// An encoder's input: BOS, the text's ids, EOS ([CLS] ... [SEP] for WordPiece, <bos> ...
  /// <eos> for Gemma's), the text's ids cut so that the whole holds at most `max_tokens` (>= 2),
  /// as sentence-transformers truncates.
  std::vector<int32_t> encode_sentence(std::string_view text, size_t max_tokens) const;

  /// The bytes the ids stand for (not necessarily valid UTF-8 when cut mid-character).
  std::string decode(const std::vector<int32_t>& ids, const DecodeOptions& options = {}) const;

  /// The bytes one token stands for: spaces for U+2581, the byte of <0xNN>, byte-level
  /// characters mapped back to bytes, a control token's own text.
  const std::string& token_text(int32_t id) const;
  /// The token's string as stored in the vocabulary (U+2581, byte-level characters...).
  const std::string& token_string(int32_t id) const;
  TokenType token_type(int32_t id) const;
  /// The id of a vocabulary string, if present.
  std::optional<int32_t> find_token(std::string_view token) const;

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  /// Whether the model wants BOS in front of a prompt (GGUF's add_bos_token).
  bool add_bos_by_default() const;
  /// End of generation: EOS, and the turn or text end tokens (<|im_end|>, <|endoftext|>,
  /// <|eot_id|>) when the vocabulary has them as control tokens.
  bool is_end(int32_t id) const;

  const std::optional<std::string>& chat_template() const;
  /// Renders the conversation with the model's template: ChatML (including a default system
  /// message the template adds when the first message is not a system one), or Gemma's turns
  /// (BOS's text first, as its template prints it: encode the result without adding BOS).
  std::string apply_chat_template(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
      ChatTemplateFallback fallback = ChatTemplateFallback::error) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

/// Decodes ids one at a time for streaming output: push() returns only whole UTF-8 characters
/// and holds back a character whose bytes have not all arrived (byte tokens, byte-level pieces);
/// bytes that can never form a character come out as U+FFFD, so every output is valid UTF-8.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, const DecodeOptions& options = {});
  std::string push(int32_t id);
  /// Emits what is held back: U+FFFD for an incomplete tail. The decoder can then be reused.
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer::Impl> impl_;
  DecodeOptions options_;
  std::string pending_;  // the first bytes of a character still being spelled
  detail::DecodeState state_;
};

/// The chat formats rendered without a template engine, recognised by their markers.
enum class ChatFormat {
  chatml,  // <|im_start|>ROLE ... <|im_end|> (SmolLM2, Qwen)
  gemma,   // <start_of_turn>ROLE ... <end_of_turn> (Gemma)
};
/// The format of a chat template text, if it is one of them.
std::optional<ChatFormat> recognise_chat_template(const std::optional<std::string>& chat_template);

/// Renders `messages` with a chat template text (see Tokenizer::apply_chat_template).
/// `bos_text`: the BOS token's text, for formats whose template begins with it (Gemma).
std::string format_chat(const std::optional<std::string>& chat_template,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        ChatTemplateFallback fallback = ChatTemplateFallback::error,
                        const std::string& bos_text = {});

/// Reads a Hugging Face tokenizer.json holding a byte-level BPE model (vocab, merges as "a b"
/// strings or [a, b] pairs, added_tokens) whose pre-tokenizer is one of the four above, or a
/// WordPiece model with BertNormalizer, BertPreTokenizer and a [CLS] $A [SEP] post-processor
/// (TemplateProcessing or BertProcessing); other models, pre-tokenizers and normalizers are
/// refused. The file's own truncation and padding are the pipeline's, not the model's, and are
/// not read. A
/// tokenizer_config.json next to it, when present, gives bos/eos tokens, add_bos_token and the
/// chat template.
TokenizerData read_hf_tokenizer_json(const std::string& path);
Tokenizer from_hf_tokenizer_json(const std::string& path);

/// Reads a GGUF file's tokenizer.* metadata: tokenizer.ggml.model and tokenizer.ggml.tokens
/// (required), .pre, .scores, .token_type, .merges, the bos/eos/unknown/padding ids (an id
/// stored as 0xFFFFFFFF, negative or not below the vocabulary size means "none"),
/// .add_bos_token, .add_space_prefix and tokenizer.chat_template. A missing required key or a
/// key holding the wrong type is a value error naming the file and the key.
TokenizerData tokenizer_data_from_gguf(const io::GgufFile& gguf);
/// tokenizer_data_from_gguf, then Tokenizer::build.
Tokenizer tokenizer_from_gguf(const io::GgufFile& gguf);

}  // namespace iron::text
