// Sentence encoders: what every encoder family shares. A family's graph (BertModel in bert.hpp,
// Gemma3Encoder in gemma3.hpp) turns a padded batch of token ids into one row per token; the
// sentence-transformers modules after it (modules.json: pooling, dense projections,
// normalisation) are one pipeline here, read from the model's directory, recorded into the same
// graph; SentenceEncoder is the host side (tokenising, prompts, batching by length, Matryoshka
// truncation).
//
// A batch of sentences runs in one call: each is padded to the batch's bucket length S (a
// segment of S rows), and the per-row valid lengths are a per-call input, `lengths` (batch,) i32,
// that the attention and the pooling read. One compiled version per (batch, S).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "iron/graph.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/precision.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::models {

/// A sentence-transformers Dense module: y = x W^T (+ b), identity activation.
struct DenseModule {
  std::string path;  // its directory, relative to the model's (e.g. "2_Dense")
  int64_t in = 0, out = 0;
  bool bias = true;
};

/// What the sentence-transformers files beside the model say (modules.json and each module's
/// config.json, sentence_bert_config.json, config_sentence_transformers.json); without them,
/// mean pooling, no dense modules, no normalisation, no prompts, and the model's max positions.
struct SentenceConfig {
  int64_t max_seq_length = 512;  // tokens a sentence is cut to, its first and last included
  bool cls_pooling = false;      // pool the first row instead of the mean of the valid rows
  std::vector<DenseModule> dense;  // applied in order after the pooling
  bool normalize = false;        // a Normalize module follows
  /// The prompts by name (a text put before the sentence: "query" -> "task: search result |
  /// query: "), and the one used when none is named (unset: none).
  std::map<std::string, std::string> prompts;
  std::optional<std::string> default_prompt;
};
/// Reads the sentence-transformers files in `dir` for a model of `max_positions` positions and
/// `dim` hidden size (the first dense module takes it, each the one before's). A module this
/// library does not run, a pooling mode other than mean or CLS (or one that leaves the prompt
/// out), a chain of dense sizes that does not fit, or a default prompt not among the prompts is
/// a value error naming the file.
SentenceConfig sentence_config_from_dir(const std::string& dir, int64_t max_positions, int64_t dim);

/// An encoder family's graph. Inputs: `tokens` (batch, S) i32 (each row a sentence's ids,
/// padded), `lengths` (batch,) i32 (valid ids per row). Output: (batch, output_dim()) f32, the
/// sentence vectors the sentence-transformers pipeline makes (pooled, projected, and with
/// `normalize`, L2-normalised).
class EncoderGraph : public Graph {
 public:
  EncoderGraph(const std::string& name, int64_t dim, const SentenceConfig& sentence, bool normalize,
               Precision precision);
  ~EncoderGraph() override;

  Input tokens, lengths;
  int64_t output_dim() const;
  /// The largest sentence a version may take (the model's positions).
  virtual int64_t max_positions() const = 0;
  /// The paths of the params the sentence-transformers modules hold, by module directory:
  /// "dense_0" -> ("2_Dense", "linear.weight"), "dense_0_bias" -> ("2_Dense", "linear.bias").
  std::map<std::string, std::pair<std::string, std::string>> module_tensors() const;

 protected:
  /// Checks the inputs and returns (batch, S).
  std::pair<int64_t, int64_t> batch_shape();
  /// Each of the batch * S rows' position in its sentence: 0 .. S-1, once per sentence.
  static std::vector<int64_t> sentence_positions(int64_t batch, int64_t S);
  /// The pipeline after the model: x (batch * S, dim), one row per token, to the sentences'
  /// vectors (batch, output_dim()).
  Handle sentence_vectors(const Handle& x, int64_t batch, int64_t S);
  Precision precision_;

 private:
  int64_t dim_;
  SentenceConfig sentence_;
  bool normalize_;
  std::vector<Param> dense_, dense_bias_;
  Param unit_scale_;  // (output_dim,): 1/sqrt(output_dim), turning an RMS norm into an L2 one
};

struct EncoderOptions {
  Precision precision = Precision::highest;
  int threads = 0;  // 0: the CPUs the process may run on
  std::string device = "cpu";  // or "vulkan" (CompileOptions::device)
  /// L2-normalise the vectors; unset: as the sentence-transformers configuration says.
  std::optional<bool> normalize;
  int64_t max_batch = 32;  // sentences per call at most (and 1024 rows: 8 sentences of 128 tokens)
};

/// Whether `path` is a sentence encoder's directory: its config.json says model_type "bert", or
/// a Gemma 3 with bidirectional attention (EmbeddingGemma): what a command given either kind of
/// model (`iron serve`) opens it as. Never throws.
bool is_sentence_encoder(const std::string& path);

/// A sentence encoder opened from a Hugging Face directory: config.json, model.safetensors,
/// tokenizer.json and, optionally, the sentence-transformers files (modules.json and its modules'
/// directories, sentence_bert_config.json, config_sentence_transformers.json).
class SentenceEncoder {
 public:
  static std::unique_ptr<SentenceEncoder> open(const std::string& dir, const EncoderOptions& options = {});
  ~SentenceEncoder();

  const SentenceConfig& sentence_config() const { return sentence_; }
  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  bool normalizes() const { return normalize_; }
  /// The vectors' size (after any dense modules).
  int64_t dim() const;
  /// "bert" or "gemma3": the family of the model.
  const std::string& family() const { return family_; }

  /// The text put before each sentence for the prompt `name`: "" for none; unset: the model's
  /// default prompt (or none). An unknown name is a value error listing the model's prompts.
  std::string prompt(const std::optional<std::string>& name = {}) const;
  /// The bucket a sentence of `tokens` ids runs in: the smallest of 16, 24, 32, 48, 64, 96, ...
  /// (powers of two and the halfway steps between them) that holds it, at most max_seq_length.
  int64_t bucket(int64_t tokens) const;
  /// The ids a text runs as: the first token, the prompt's and the text's ids, the last token,
  /// cut to max_seq_length (as sentence-transformers: the prompt is part of the text).
  std::vector<int32_t> ids(const std::string& text, const std::string& prompt = {}) const;
  /// One vector per id list (each as ids() gives them), in order: sorted by length into buckets,
  /// batches of at most max_batch per call. `progress(done, total)` after each call.
  std::vector<std::vector<float>> embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                            const std::function<void(size_t, size_t)>& progress = {});
  std::vector<std::vector<float>> embed(const std::vector<std::string>& texts,
                                        const std::function<void(size_t, size_t)>& progress = {});

 private:
  SentenceEncoder() = default;
  std::string family_;
  SentenceConfig sentence_;
  EncoderOptions options_;
  bool normalize_ = false;
  int64_t vocab_ = 0;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  StateDict weights_;
  std::unique_ptr<EncoderGraph> model_;
};

/// Matryoshka truncation: each vector cut to its first `dims` values and, with `renormalise`,
/// L2-normalised again (a zero vector stays zero). `dims` from 1 to the vectors' size; anything
/// else is a value error.
void truncate_dimensions(std::vector<std::vector<float>>& vectors, int64_t dims, bool renormalise = true);

}  // namespace iron::models
