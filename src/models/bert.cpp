// BERT-family sentence encoders (include/iron/models/bert.hpp): the config, the
// sentence-transformers files, the graph and the batching host side.
#include "iron/models/bert.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <numeric>

#include "iron/error.hpp"
#include "iron/functional.hpp"
#include "iron/io/safetensors.hpp"

namespace iron::models {

namespace F = functional;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Rows (sentences times their bucket's tokens) one encoder call takes at most.
constexpr int64_t kRowsPerCall = 1024;

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

SentenceConfig sentence_config_from_dir(const std::string& dir, const BertConfig& config) {
  SentenceConfig s;
  s.max_seq_length = config.max_positions;
  const fs::path root(dir);
  std::string pooling_dir;
  std::error_code ec;  // a path that cannot be looked up counts as absent: opening it says why
  if (fs::exists(root / "modules.json", ec)) {
    const json modules = io::read_json_file((root / "modules.json").string());
    if (!modules.is_array()) value_error(escaped_path(dir + "/modules.json") + ": not a list of modules");
    for (const json& m : modules) {
      const std::string type = m.is_object() && m.value("type", json("")).is_string() ? m.value("type", "") : "";
      const std::string path = m.is_object() && m.value("path", json("")).is_string() ? m.value("path", "") : "";
      if (type == "sentence_transformers.models.Transformer") continue;
      if (type == "sentence_transformers.models.Pooling") {
        pooling_dir = path;
      } else if (type == "sentence_transformers.models.Normalize") {
        s.normalize = true;
      } else {
        value_error(escaped_path(dir + "/modules.json") + ": module " + escaped(type, 80) +
                    " is not supported (Transformer, Pooling and Normalize are)");
      }
    }
  }
  const fs::path pooling = pooling_dir.empty() ? root / "1_Pooling" / "config.json" : root / pooling_dir / "config.json";
  if (pooling_dir.find("..") != std::string::npos) value_error(escaped_path(dir + "/modules.json") + ": a module path leaves the directory");
  if (fs::exists(pooling, ec)) {
    const json p = io::read_json_file(pooling.string());
    const auto flag = [&](const char* key) { return p.is_object() && p.value(key, json(false)).is_boolean() && p.value(key, false); };
    const bool mean = flag("pooling_mode_mean_tokens"), cls = flag("pooling_mode_cls_token");
    if (mean == cls || flag("pooling_mode_max_tokens") || flag("pooling_mode_mean_sqrt_len_tokens") ||
        flag("pooling_mode_weightedmean_tokens") || flag("pooling_mode_lasttoken"))
      value_error(escaped_path(pooling.string()) + ": one pooling mode of mean or cls tokens is supported, not " + escaped(p.dump(), 200));
    s.cls_pooling = cls;
  }
  if (fs::exists(root / "sentence_bert_config.json", ec)) {
    const json sb = io::read_json_file((root / "sentence_bert_config.json").string());
    if (sb.is_object() && sb.contains("max_seq_length")) {
      if (!sb["max_seq_length"].is_number_integer() || sb["max_seq_length"].get<int64_t>() < 2 ||
          sb["max_seq_length"].get<int64_t>() > config.max_positions)
        value_error(escaped_path(dir + "/sentence_bert_config.json") + ": max_seq_length " + escaped(sb["max_seq_length"].dump(), 40) +
                    " is not in [2, " + std::to_string(config.max_positions) + "]");
      s.max_seq_length = sb["max_seq_length"].get<int64_t>();
    }
  }
  return s;
}

// The Hugging Face name of a tensor the graph holds at `path` (held names are one path part
// each, so the graph's own are flat: "word_embeddings", "layers.3.query_bias").
std::string hf_name(const std::string& path) {
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

BertModel::BertModel(const BertConfig& config, bool cls_pooling, bool normalize, Precision precision)
    : Graph("bert"), config_(config), cls_pooling_(cls_pooling), normalize_(normalize), precision_(precision) {
  tokens = input("tokens");
  lengths = input("lengths");
  const BertConfig& c = config_;
  word = param("word_embeddings", {c.vocab, c.dim});
  position = param("position_embeddings", {c.max_positions, c.dim});
  token_type = param("token_type_embeddings", {c.type_vocab, c.dim});
  embed_norm_w = param("embeddings_norm", {c.dim});
  embed_norm_b = param("embeddings_norm_bias", {c.dim});
  layers_ = children<Layer>("layers", int(c.layers), c);
  unit_scale_ = param("unit_scale", Tensor::from(std::vector<float>(size_t(c.dim), float(1 / std::sqrt(double(c.dim)))), {c.dim}));
}

BertModel::~BertModel() = default;

Outputs BertModel::body() {
  const BertConfig& c = config_;
  if (tokens.shape().size() != 2 || tokens->dtype() != i32 || lengths.shape() != Shape{tokens.shape()[0]} ||
      lengths->dtype() != i32)
    value_error("bert: tokens (batch, S) i32 and lengths (batch,) i32, not " + tokens->str() + " and " + lengths->str());
  const int64_t batch = tokens.shape()[0], S = tokens.shape()[1], rows = batch * S;
  if (S > c.max_positions)
    value_error("bert: sentences of " + std::to_string(S) + " tokens, past the model's " +
                std::to_string(c.max_positions) + " positions");
  // Word, position (0 .. S-1 in every sentence) and token-type 0 embeddings.
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) positions[size_t(r)] = r % S;
  Handle x = F::copy(Handle(word)[Handle(tokens).reshape({rows})]) + F::copy(Handle(position).rows(positions));
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
  Handle pooled = cls_pooling_ ? F::copy(x.reshape({batch, S, c.dim})[{all, 0}]) : F::segment_mean(x, lengths, S);
  // x / sqrt(|x|^2 + 1e-24) as an RMS norm with weight 1/sqrt(dim): torch's F.normalize divides
  // by max(|x|, 1e-12), the same but for vectors of norm below 1e-12.
  if (normalize_) pooled = F::rms_norm(pooled, c.dim, unit_scale_, 1e-24 / double(c.dim));
  return {pooled};
}

// ---- the host side ----------------------------------------------------------------------------

bool is_sentence_encoder(const std::string& path) {
  try {
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::is_directory(path) || !fs::is_regular_file(config)) return false;
    const json c = io::read_json_file(config.string());
    return c.is_object() && c.value("model_type", json("")) == json("bert");
  } catch (const std::exception&) {
    return false;  // unreadable or not JSON: not an encoder's, and whoever opens it says why
  }
}

std::unique_ptr<SentenceEncoder> SentenceEncoder::open(const std::string& dir, const EncoderOptions& options) {
  const fs::path root(dir);
  // std::filesystem's exceptions quote whole paths: a path that cannot be looked up (too long,
  // not searchable) is "not found" here instead.
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    value_error(escaped_path(dir) + (fs::exists(root, ec) ? ": a file (decoders come as GGUF or safetensors files); " : ": not found; ") +
                "a sentence encoder is a Hugging Face directory (config.json, model.safetensors, tokenizer.json) "
                "of a BERT-family model");
  if (!fs::exists(root / "config.json", ec)) value_error(escaped_path(dir) + ": no config.json (a sentence encoder's directory needs it)");
  // The config first: a decoder's directory is named as one whatever else it holds.
  const BertConfig config = bert_config_from_hf(io::read_json_file((root / "config.json").string()));
  for (const char* f : {"model.safetensors", "tokenizer.json"})
    if (!fs::exists(root / f, ec)) value_error(escaped_path(dir) + ": no " + f + " (a sentence encoder's directory needs it)");
  if (options.max_batch < 1 || options.max_batch > 4096)
    value_error("sentence encoder: a batch of 1 to 4096 sentences, not " + std::to_string(options.max_batch));
  std::unique_ptr<SentenceEncoder> e(new SentenceEncoder());
  e->options_ = options;
  e->config_ = config;
  e->sentence_ = sentence_config_from_dir(dir, e->config_);
  e->normalize_ = options.normalize.value_or(e->sentence_.normalize);
  e->tokenizer_ = std::make_unique<text::Tokenizer>(text::from_hf_tokenizer_json((root / "tokenizer.json").string()));
  if (e->tokenizer_->vocab_size() > e->config_.vocab)
    value_error(escaped_path(dir) + ": tokenizer.json has " + std::to_string(e->tokenizer_->vocab_size()) +
                " tokens, the model's embeddings " + std::to_string(e->config_.vocab));
  e->tokenizer_->encode_sentence("", 2);  // a WordPiece tokenizer with [CLS] and [SEP], or an error
  e->model_ = std::make_unique<BertModel>(e->config_, e->sentence_.cls_pooling, e->normalize_, options.precision);
  // Only the tensors the graph holds (the file also has position_ids and the unused pooler),
  // under their names or with a "bert." prefix.
  const io::SafetensorsFile file = io::SafetensorsFile::open((root / "model.safetensors").string());
  for (const auto& [path, resident] : e->model_->held()) {
    if (path == "unit_scale") continue;
    const std::string name = hf_name(path);
    if (file.find_tensor(name))
      e->weights_.insert(path, file.tensor(name));
    else if (file.find_tensor("bert." + name))
      e->weights_.insert(path, file.tensor("bert." + name));
    else
      value_error(escaped_path(dir + "/model.safetensors") + ": no tensor " + name + " (nor bert." + name + ")");
  }
  e->model_->load_state_dict(e->weights_);
  return e;
}

int64_t SentenceEncoder::bucket(int64_t tokens) const {
  int64_t b = 32;
  while (b < tokens) b *= 2;
  return std::min(b, sentence_.max_seq_length);
}

std::vector<int32_t> SentenceEncoder::ids(const std::string& text) const {
  return tokenizer_->encode_sentence(text, size_t(sentence_.max_seq_length));
}

std::vector<std::vector<float>> SentenceEncoder::embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                                           const std::function<void(size_t, size_t)>& progress) {
  const int64_t dim = config_.dim;
  for (const auto& s : ids) {
    if (s.empty() || int64_t(s.size()) > sentence_.max_seq_length)
      value_error("sentence encoder: a sentence of " + std::to_string(s.size()) + " ids (1 to max_seq_length " +
                  std::to_string(sentence_.max_seq_length) + ")");
    for (const int32_t id : s)
      if (id < 0 || id >= config_.vocab)
        value_error("sentence encoder: token id " + std::to_string(id) + " is outside the vocabulary of " +
                    std::to_string(config_.vocab));
  }
  // Shortest first, so each call's sentences share a bucket and pad little.
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::vector<float>> out(ids.size());
  size_t done = 0;
  while (done < order.size()) {
    const int64_t S = bucket(int64_t(ids[order[done]].size()));
    // At most kRowsPerCall rows a call: a batch of 32 sentences of 128 tokens (4096 rows) streams
    // its activations through memory between steps, where 8 of them stay in the caches (14%
    // faster measured, bench_embed_speed batch 8 against 32).
    const int64_t most = std::max<int64_t>(1, std::min(options_.max_batch, kRowsPerCall / S));
    size_t end = done;
    while (end < order.size() && int64_t(end - done) < most && bucket(int64_t(ids[order[end]].size())) == S)
      ++end;
    const int64_t batch = int64_t(end - done);
    std::vector<int32_t> tokens(static_cast<size_t>(batch * S), 0), lengths(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int32_t>& s = ids[order[done + size_t(b)]];
      std::copy(s.begin(), s.end(), tokens.begin() + b * S);
      lengths[size_t(b)] = int32_t(s.size());
    }
    const Tensor t = Tensor::from_ints(tokens, {batch, S}), l = Tensor::from_ints(lengths, {batch});
    CompiledGraph& version = model_->compile({{"tokens", InputSpec({batch, S}, i32)}, {"lengths", InputSpec({batch}, i32)}},
                                             {.threads = options_.threads, .device = options_.device});
    const RunResult& r = version({t, l});
    const float* y = r[0].data_as<float>();
    for (int64_t b = 0; b < batch; ++b) out[order[done + size_t(b)]].assign(y + b * dim, y + (b + 1) * dim);
    done = end;
    if (progress) progress(done, order.size());
  }
  return out;
}

std::vector<std::vector<float>> SentenceEncoder::embed(const std::vector<std::string>& texts,
                                                       const std::function<void(size_t, size_t)>& progress) {
  std::vector<std::vector<int32_t>> all;
  all.reserve(texts.size());
  for (const std::string& t : texts) all.push_back(ids(t));
  return embed_ids(all, progress);
}

}  // namespace iron::models
