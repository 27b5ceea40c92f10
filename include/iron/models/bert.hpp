// BERT-family sentence encoders (all-MiniLM-L6-v2 and its kind) as an IRON graph: word, position
// and token-type embeddings and their LayerNorm; post-norm blocks of bidirectional attention and
// an exact-GELU feed-forward; then the sentence-transformers pipeline every encoder shares
// (encoder.hpp: pooling, dense modules, normalisation).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "iron/models/encoder.hpp"

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

/// The graph (EncoderGraph's inputs and output).
class BertModel : public EncoderGraph {
 public:
  BertModel(const BertConfig& config, const SentenceConfig& sentence, bool normalize, Precision precision);
  ~BertModel() override;
  Outputs body() override;
  int64_t max_positions() const override { return config_.max_positions; }
  /// The Hugging Face name of the tensor this graph holds at `path`.
  static std::string hf_name(const std::string& path);

 private:
  struct Layer;
  BertConfig config_;
  Param word, position, token_type, embed_norm_w, embed_norm_b;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace iron::models
