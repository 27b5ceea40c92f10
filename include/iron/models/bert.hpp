// BERT-family sentence encoders (all-MiniLM-L6-v2 and its kind) as an IRON graph: word, position
// and token-type embeddings and their LayerNorm; post-norm blocks of bidirectional attention and
// an exact-GELU feed-forward; mean (or [CLS]) pooling over each sentence's valid tokens; L2
// normalisation where the sentence-transformers configuration asks for it.
//
// A batch of sentences runs in one call: each is padded to the batch's bucket length S (a
// segment of S rows), and the per-row valid lengths are a per-call input, `lengths` (batch,) i32,
// that the attention and the pooling read. One compiled version per (batch, S).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "iron/graph.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/precision.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::models {

/// A BERT config.json (model_type "bert"; hidden_act "gelu", absolute positions).
struct BertConfig {
  int64_t vocab = 0, dim = 0, layers = 0, heads = 0, ffn = 0, max_positions = 0, type_vocab = 0;
  double eps = 1e-12;
  int64_t head_dim() const { return dim / heads; }
};
/// Reads and checks a config.json; a decoder's (Llama, Gemma...) or another encoder's is refused,
/// naming its model_type.
BertConfig bert_config_from_hf(const nlohmann::json& config);

/// What the sentence-transformers files beside the model say (modules.json, the pooling
/// module's config.json, sentence_bert_config.json); without them, mean pooling, no
/// normalisation, and the model's max_positions.
struct SentenceConfig {
  int64_t max_seq_length = 512;  // tokens a sentence is cut to, [CLS] and [SEP] included
  bool cls_pooling = false;      // pool the [CLS] row instead of the mean of the valid rows
  bool normalize = false;        // a Normalize module follows the pooling
};
SentenceConfig sentence_config_from_dir(const std::string& dir, const BertConfig& config);

/// The graph. Inputs: `tokens` (batch, S) i32 (each row a sentence's ids, padded), `lengths`
/// (batch,) i32 (valid ids per row). Output: (batch, dim) f32, the pooled (and, with
/// `normalize`, L2-normalised) vectors.
class BertModel : public Graph {
 public:
  BertModel(const BertConfig& config, bool cls_pooling, bool normalize, Precision precision);
  ~BertModel() override;
  Outputs body() override;

  Input tokens, lengths;

 private:
  struct Layer;
  BertConfig config_;
  bool cls_pooling_, normalize_;
  Precision precision_;
  Param word, position, token_type, embed_norm_w, embed_norm_b;
  std::vector<std::unique_ptr<Layer>> layers_;
  Param unit_scale_;  // (dim,): 1/sqrt(dim), turning an RMS norm into an L2 one
};

struct EncoderOptions {
  Precision precision = Precision::highest;
  int threads = 0;  // 0: the CPUs the process may run on
  std::string device = "cpu";  // or "vulkan" (CompileOptions::device)
  /// L2-normalise the vectors; unset: as the sentence-transformers configuration says.
  std::optional<bool> normalize;
  int64_t max_batch = 32;  // sentences per call at most (and 1024 rows: 8 sentences of 128 tokens)
};

/// Whether `path` is a sentence encoder's directory: config.json there says model_type "bert"
/// (what a command given either kind of model, `iron serve`, opens it as). Never throws.
bool is_sentence_encoder(const std::string& path);

/// A sentence encoder opened from a Hugging Face directory: config.json, model.safetensors,
/// tokenizer.json (WordPiece) and, optionally, the sentence-transformers configs.
class SentenceEncoder {
 public:
  static std::unique_ptr<SentenceEncoder> open(const std::string& dir, const EncoderOptions& options = {});

  const BertConfig& config() const { return config_; }
  const SentenceConfig& sentence_config() const { return sentence_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  bool normalizes() const { return normalize_; }
  int64_t dim() const { return config_.dim; }

  /// The bucket a sentence of `tokens` ids runs in: the smallest of 32, 64, 128, 256, ... that
  /// holds it, at most max_seq_length.
  int64_t bucket(int64_t tokens) const;
  /// The ids a text runs as: [CLS] ... [SEP], cut to max_seq_length.
  std::vector<int32_t> ids(const std::string& text) const;
  /// One vector per id list (each as ids() gives them), in order: sorted by length into buckets,
  /// batches of at most max_batch per call. `progress(done, total)` after each call.
  std::vector<std::vector<float>> embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                            const std::function<void(size_t, size_t)>& progress = {});
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts,
                                        const std::function<void(size_t, size_t)>& progress = {});

 private:
  SentenceEncoder() = default;
  BertConfig config_;
  SentenceConfig sentence_;
  EncoderOptions options_;
  bool normalize_ = false;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  StateDict weights_;
  std::unique_ptr<BertModel> model_;
};

}  // namespace iron::models
