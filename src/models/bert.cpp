// BERT-family sentence encoders (include/iron/models/bert.hpp): the config and the graph
// (encoder.cpp holds the sentence-transformers pipeline and the host side).
#include "iron/models/bert.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "iron/error.hpp"
#include "iron/functional.hpp"

namespace iron::models {

namespace F = functional;
using nlohmann::json;

namespace {

int64_t positive(const json& config, const char* key) {
  if (!config.contains(key) || !config[key].is_number_integer())
    value_error(std::string("config.json: \"") + key + "\" is missing or not an integer");
  const int64_t v = config[key].get<int64_t>();
  // Every size stays far below what a shape or a per-call value may hold.
  if (v < 1 || v > (int64_t(1) << 24))
    value_error(std::string("config.json: \"") + key + "\" is " + std::to_string(v) + ", outside [1, 2^24]");
  return v;
}

}  // namespace

BertConfig bert_config_from_hf(const json& config) {
  if (!config.is_object()) value_error("config.json: not a JSON object");
  const std::string type = config.value("model_type", json("")).is_string() ? config.value("model_type", "") : "";
  if (type != "bert") {
    const bool decoder = type == "llama" || type == "gemma3" || type == "gemma3_text" || type == "mistral" ||
                         type == "qwen2" || type == "gpt2";
    value_error("config.json: model_type \"" + escaped(type) + "\"" +
                (decoder ? " is a decoder (a language model), not a sentence encoder" : " is not a BERT encoder") +
                "; embeddings need a BERT-family model (model_type \"bert\", e.g. all-MiniLM-L6-v2)");
  }
  BertConfig c;
  c.vocab = positive(config, "vocab_size");
  c.dim = positive(config, "hidden_size");
  c.layers = positive(config, "num_hidden_layers");
  c.heads = positive(config, "num_attention_heads");
  c.ffn = positive(config, "intermediate_size");
  c.max_positions = positive(config, "max_position_embeddings");
  c.type_vocab = positive(config, "type_vocab_size");
  if (c.dim % c.heads != 0)
    value_error("config.json: hidden_size " + std::to_string(c.dim) + " is not a multiple of num_attention_heads " +
                std::to_string(c.heads));
  if (c.layers > 1024) value_error("config.json: num_hidden_layers " + std::to_string(c.layers) + " is past 1024");
  const json act = config.value("hidden_act", json("gelu"));
  if (!act.is_string() || act.get<std::string>() != "gelu")
    value_error("config.json: hidden_act " + escaped(act.dump(), 40) + " (only \"gelu\", the exact GELU, is supported)");
  const json pos = config.value("position_embedding_type", json("absolute"));
  if (!pos.is_string() || pos.get<std::string>() != "absolute")
    value_error("config.json: position_embedding_type " + escaped(pos.dump(), 40) + " (only \"absolute\")");
  const json eps = config.value("layer_norm_eps", json(1e-12));
  if (!eps.is_number() || !(eps.get<double>() > 0) || !(eps.get<double>() < 1))
    value_error("config.json: layer_norm_eps " + escaped(eps.dump(), 40) + " is not in (0, 1)");
  c.eps = eps.get<double>();
  return c;
}

// Held names are one path part each, so the graph's own are flat: "word_embeddings",
// "layers.3.query_bias".
std::string BertModel::hf_name(const std::string& path) {
  static const std::map<std::string, std::string> kTop{{"word_embeddings", "embeddings.word_embeddings.weight"},
      {"position_embeddings", "embeddings.position_embeddings.weight"},
      {"token_type_embeddings", "embeddings.token_type_embeddings.weight"},
      {"embeddings_norm", "embeddings.LayerNorm.weight"},
      {"embeddings_norm_bias", "embeddings.LayerNorm.bias"}};
  static const std::map<std::string, std::string> kLayer{{"query", "attention.self.query.weight"},
      {"query_bias", "attention.self.query.bias"},
      {"key", "attention.self.key.weight"},
      {"key_bias", "attention.self.key.bias"},
      {"value", "attention.self.value.weight"},
      {"value_bias", "attention.self.value.bias"},
      {"attn_out", "attention.output.dense.weight"},
      {"attn_out_bias", "attention.output.dense.bias"},
      {"attn_norm", "attention.output.LayerNorm.weight"},
      {"attn_norm_bias", "attention.output.LayerNorm.bias"},
      {"ffn_up", "intermediate.dense.weight"},
      {"ffn_up_bias", "intermediate.dense.bias"},
      {"ffn_down", "output.dense.weight"},
      {"ffn_down_bias", "output.dense.bias"},
      {"ffn_norm", "output.LayerNorm.weight"},
      {"ffn_norm_bias", "output.LayerNorm.bias"}};
  if (path.rfind("layers.", 0) == 0) {
    const size_t dot = path.find('.', 7);
    const auto it = dot == std::string::npos ? kLayer.end() : kLayer.find(path.substr(dot + 1));
    if (it != kLayer.end()) return "encoder.layer." + path.substr(7, dot - 7) + "." + it->second;
  }
  const auto it = kTop.find(path);
  return it == kTop.end() ? path : it->second;
}

// ---- the graph ------------------------------------------------------------------------------

struct BertModel::Layer : Module {
  explicit Layer(const BertConfig& c)
      : q(param("query", {c.dim, c.dim})),
        q_b(param("query_bias", {c.dim})),
        k(param("key", {c.dim, c.dim})),
        k_b(param("key_bias", {c.dim})),
        v(param("value", {c.dim, c.dim})),
        v_b(param("value_bias", {c.dim})),
        o(param("attn_out", {c.dim, c.dim})),
        o_b(param("attn_out_bias", {c.dim})),
        attn_norm(param("attn_norm", {c.dim})),
        attn_norm_b(param("attn_norm_bias", {c.dim})),
        up(param("ffn_up", {c.ffn, c.dim})),
        up_b(param("ffn_up_bias", {c.ffn})),
        down(param("ffn_down", {c.dim, c.ffn})),
        down_b(param("ffn_down_bias", {c.dim})),
        ffn_norm(param("ffn_norm", {c.dim})),
        ffn_norm_b(param("ffn_norm_bias", {c.dim})) {}
  Param q, q_b, k, k_b, v, v_b, o, o_b, attn_norm, attn_norm_b, up, up_b, down, down_b, ffn_norm, ffn_norm_b;
};

BertModel::BertModel(const BertConfig& config, const SentenceConfig& sentence, bool normalize, Precision precision)
    : EncoderGraph("bert", config.dim, sentence, normalize, precision), config_(config) {
  const BertConfig& c = config_;
  word = param("word_embeddings", {c.vocab, c.dim});
  position = param("position_embeddings", {c.max_positions, c.dim});
  token_type = param("token_type_embeddings", {c.type_vocab, c.dim});
  embed_norm_w = param("embeddings_norm", {c.dim});
  embed_norm_b = param("embeddings_norm_bias", {c.dim});
  layers_ = children<Layer>("layers", int(c.layers), c);
}

BertModel::~BertModel() = default;

Outputs BertModel::body() {
  const BertConfig& c = config_;
  const auto [batch, S] = batch_shape();
  const int64_t rows = batch * S;
  // Word, position (0 .. S-1 in every sentence) and token-type 0 embeddings.
  Handle x = F::copy(Handle(word)[Handle(tokens).reshape({rows})]) +
             F::copy(Handle(position).rows(sentence_positions(batch, S)));
  x = F::layer_norm(x + Handle(token_type)[0], c.dim, embed_norm_w, embed_norm_b, c.eps);
  const auto heads = [&](const Handle& y) { return y.reshape({rows, c.heads, c.head_dim()}); };
  for (const auto& l : layers_) {
    Handle q = F::linear(x, l->q, l->q_b, precision_), k = F::linear(x, l->k, l->k_b, precision_),
           v = F::linear(x, l->v, l->v_b, precision_);
    Handle a = F::segment_attention(heads(q), heads(k), heads(v), lengths, S, {}, 0, precision_).reshape({rows, c.dim});
    x = F::layer_norm(F::linear(a, l->o, l->o_b, precision_) + x, c.dim, l->attn_norm, l->attn_norm_b, c.eps);
    Handle f = F::gelu(F::linear(x, l->up, l->up_b, precision_));
    x = F::layer_norm(F::linear(f, l->down, l->down_b, precision_) + x, c.dim, l->ffn_norm, l->ffn_norm_b, c.eps);
  }
  return {sentence_vectors(x, batch, S)};
}

}  // namespace iron::models
