// Sentence encoders (include/iron/models/encoder.hpp): the sentence-transformers files, the
// pipeline after the model, and the host side every encoder family shares.
#include "iron/models/encoder.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>

#include "graph/recording.hpp"
#include "iron/error.hpp"
#include "iron/functional.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/bert.hpp"
#include "iron/models/gemma3.hpp"
#include "iron/models/llama_config.hpp"

namespace iron::models {

namespace F = functional;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Rows (sentences times their bucket's tokens) one encoder call takes at most.
constexpr int64_t kRowsPerCall = 1024;

std::string type_of(const json& m) {
  return m.is_object() && m.value("type", json("")).is_string() ? m.value("type", "") : "";
}

// A module's directory from modules.json, checked to stay inside the model's.
std::string module_dir(const json& m, const std::string& dir) {
  const std::string path = m.is_object() && m.value("path", json("")).is_string() ? m.value("path", "") : "";
  if (path.find("..") != std::string::npos || (!path.empty() && path[0] == '/'))
    value_error(escaped_path(dir + "/modules.json") + ": a module path leaves the directory");
  return path;
}

void read_pooling(const fs::path& file, SentenceConfig& s) {
  const json p = io::read_json_file(file.string());
  const auto flag = [&](const char* key) {
    return p.is_object() && p.value(key, json(false)).is_boolean() && p.value(key, false);
  };
  const bool mean = flag("pooling_mode_mean_tokens"), cls = flag("pooling_mode_cls_token");
  if (mean == cls || flag("pooling_mode_max_tokens") || flag("pooling_mode_mean_sqrt_len_tokens") ||
      flag("pooling_mode_weightedmean_tokens") || flag("pooling_mode_lasttoken"))
    value_error(escaped_path(file.string()) + ": one pooling mode of mean or cls tokens is supported, not " +
                escaped(p.dump(), 200));
  // Leaving the prompt's tokens out of the mean is not done here: refused rather than ignored.
  if (p.is_object() && p.contains("include_prompt") && p["include_prompt"] != json(true))
    value_error(escaped_path(file.string()) + ": include_prompt " + escaped(p["include_prompt"].dump(), 20) +
                " (pooling without the prompt's tokens) is not supported");
  s.cls_pooling = cls;
}

DenseModule read_dense(const fs::path& file, const std::string& path, int64_t in) {
  const json d = io::read_json_file(file.string());
  const auto size = [&](const char* key) {
    if (!d.is_object() || !d.contains(key) || !d[key].is_number_integer() || d[key].get<int64_t>() < 1 ||
        d[key].get<int64_t>() > (int64_t(1) << 20))
      value_error(escaped_path(file.string()) + ": \"" + key + "\" is missing or not in [1, 2^20]");
    return d[key].get<int64_t>();
  };
  DenseModule m{path, size("in_features"), size("out_features"), true};
  if (m.in != in)
    value_error(escaped_path(file.string()) + ": in_features " + std::to_string(m.in) + ", but the module before gives " +
                std::to_string(in));
  if (d.contains("bias")) {
    if (!d["bias"].is_boolean()) value_error(escaped_path(file.string()) + ": \"bias\" is not a boolean");
    m.bias = d["bias"].get<bool>();
  }
  const json act = d.value("activation_function", json("torch.nn.modules.linear.Identity"));
  if (act != json("torch.nn.modules.linear.Identity"))
    value_error(escaped_path(file.string()) + ": activation_function " + escaped(act.dump(), 80) +
                " (only torch.nn.modules.linear.Identity is supported)");
  return m;
}

void read_prompts(const fs::path& file, SentenceConfig& s) {
  const json c = io::read_json_file(file.string());
  if (!c.is_object()) value_error(escaped_path(file.string()) + ": not a JSON object");
  if (c.contains("prompts") && !c["prompts"].is_null()) {
    if (!c["prompts"].is_object()) value_error(escaped_path(file.string()) + ": \"prompts\" is not an object");
    for (const auto& [name, text] : c["prompts"].items()) {
      if (!text.is_string()) value_error(escaped_path(file.string()) + ": the prompt " + escaped(name, 60) + " is not a string");
      s.prompts[name] = text.get<std::string>();
    }
  }
  if (c.contains("default_prompt_name") && !c["default_prompt_name"].is_null()) {
    const json& name = c["default_prompt_name"];
    if (!name.is_string() || !s.prompts.count(name.get<std::string>()))
      value_error(escaped_path(file.string()) + ": default_prompt_name " + escaped(name.dump(), 60) +
                  " is not one of its prompts");
    s.default_prompt = name.get<std::string>();
  }
}

}  // namespace

SentenceConfig sentence_config_from_dir(const std::string& dir, int64_t max_positions, int64_t dim) {
  SentenceConfig s;
  s.max_seq_length = max_positions;
  const fs::path root(dir);
  std::string pooling_dir;
  bool listed_pooling = false;
  std::error_code ec;  // a path that cannot be looked up counts as absent: opening it says why
  if (fs::exists(root / "modules.json", ec)) {
    const json modules = io::read_json_file((root / "modules.json").string());
    if (!modules.is_array()) value_error(escaped_path(dir + "/modules.json") + ": not a list of modules");
    int64_t width = dim;
    for (const json& m : modules) {
      const std::string type = type_of(m), path = module_dir(m, dir);
      if (type == "sentence_transformers.models.Transformer") continue;
      if (type == "sentence_transformers.models.Pooling") {
        if (listed_pooling || !s.dense.empty() || s.normalize)
          value_error(escaped_path(dir + "/modules.json") + ": the pooling module is not the first after the model");
        listed_pooling = true;
        pooling_dir = path;
      } else if (type == "sentence_transformers.models.Dense") {
        if (s.normalize) value_error(escaped_path(dir + "/modules.json") + ": a dense module after Normalize");
        s.dense.push_back(read_dense(root / path / "config.json", path, width));
        width = s.dense.back().out;
      } else if (type == "sentence_transformers.models.Normalize") {
        s.normalize = true;
      } else {
        value_error(escaped_path(dir + "/modules.json") + ": module " + escaped(type, 80) +
                    " is not supported (Transformer, Pooling, Dense and Normalize are)");
      }
    }
  }
  const fs::path pooling = pooling_dir.empty() ? root / "1_Pooling" / "config.json" : root / pooling_dir / "config.json";
  if (fs::exists(pooling, ec)) read_pooling(pooling, s);
  if (fs::exists(root / "sentence_bert_config.json", ec)) {
    const json sb = io::read_json_file((root / "sentence_bert_config.json").string());
    if (sb.is_object() && sb.contains("max_seq_length")) {
      if (!sb["max_seq_length"].is_number_integer() || sb["max_seq_length"].get<int64_t>() < 2 ||
          sb["max_seq_length"].get<int64_t>() > max_positions)
        value_error(escaped_path(dir + "/sentence_bert_config.json") + ": max_seq_length " +
                    escaped(sb["max_seq_length"].dump(), 40) + " is not in [2, " + std::to_string(max_positions) + "]");
      s.max_seq_length = sb["max_seq_length"].get<int64_t>();
    }
  }
  if (fs::exists(root / "config_sentence_transformers.json", ec)) read_prompts(root / "config_sentence_transformers.json", s);
  return s;
}

// ---- the pipeline in the graph ------------------------------------------------------------------

EncoderGraph::EncoderGraph(const std::string& name, int64_t dim, const SentenceConfig& sentence, bool normalize,
                           Precision precision)
    : Graph(name), precision_(precision), dim_(dim), sentence_(sentence), normalize_(normalize) {
  tokens = input("tokens");
  lengths = input("lengths");
  for (size_t i = 0; i < sentence_.dense.size(); ++i) {
    const DenseModule& m = sentence_.dense[i];
    dense_.push_back(param("dense_" + std::to_string(i), {m.out, m.in}, f32));
    dense_bias_.push_back(m.bias ? param("dense_" + std::to_string(i) + "_bias", {m.out}, f32) : Param());
  }
  const int64_t out = output_dim();
  unit_scale_ = param("unit_scale", Tensor::from(std::vector<float>(size_t(out), float(1 / std::sqrt(double(out)))), {out}));
}

EncoderGraph::~EncoderGraph() = default;

int64_t EncoderGraph::output_dim() const { return sentence_.dense.empty() ? dim_ : sentence_.dense.back().out; }

std::map<std::string, std::pair<std::string, std::string>> EncoderGraph::module_tensors() const {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < sentence_.dense.size(); ++i) {
    const std::string name = "dense_" + std::to_string(i);
    out[name] = {sentence_.dense[i].path, "linear.weight"};
    if (sentence_.dense[i].bias) out[name + "_bias"] = {sentence_.dense[i].path, "linear.bias"};
  }
  return out;
}

std::pair<int64_t, int64_t> EncoderGraph::batch_shape() {
  if (tokens.shape().size() != 2 || tokens->dtype() != i32 || lengths.shape() != Shape{tokens.shape()[0]} ||
      lengths->dtype() != i32)
    value_error(name() + ": tokens (batch, S) i32 and lengths (batch,) i32, not " + tokens->str() + " and " +
                lengths->str());
  const int64_t S = tokens.shape()[1];
  if (S > max_positions())
    value_error(name() + ": sentences of " + std::to_string(S) + " tokens, past the model's " +
                std::to_string(max_positions()) + " positions");
  return {tokens.shape()[0], S};
}

std::vector<int64_t> EncoderGraph::sentence_positions(int64_t batch, int64_t S) {
  std::vector<int64_t> positions(static_cast<size_t>(batch * S));
  for (size_t r = 0; r < positions.size(); ++r) positions[r] = int64_t(r) % S;
  return positions;
}

Handle EncoderGraph::sentence_vectors(const Handle& x, int64_t batch, int64_t S) {
  Handle v = sentence_.cls_pooling ? F::copy(x.reshape({batch, S, dim_})[{all, 0}]) : F::segment_mean(x, lengths, S);
  for (size_t i = 0; i < dense_.size(); ++i)
    v = F::linear(v, dense_[i], dense_bias_[i].resident() ? Handle(dense_bias_[i]) : Handle(), precision_);
  // x / sqrt(|x|^2 + 1e-24) as an RMS norm with weight 1/sqrt(dim): torch's F.normalize divides
  // by max(|x|, 1e-12), the same but for vectors of norm below 1e-12.
  const int64_t out = output_dim();
  if (normalize_) v = F::rms_norm(v, out, unit_scale_, 1e-24 / double(out));
  return v;
}

// ---- the host side ----------------------------------------------------------------------------

namespace {

// The model_type of a directory's config.json and whether it attends both ways; throws when the
// file cannot be read.
std::pair<std::string, bool> model_kind(const json& c) {
  const std::string type = c.is_object() && c.value("model_type", json("")).is_string() ? c.value("model_type", "") : "";
  const bool both = c.is_object() && c.value("use_bidirectional_attention", json(false)) == json(true);
  return {type, both};
}

bool is_encoder_kind(const std::pair<std::string, bool>& kind) {
  return kind.first == "bert" || (kind.second && (kind.first == "gemma3_text" || kind.first == "gemma3"));
}

}  // namespace

bool is_sentence_encoder(const std::string& path) {
  try {
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::is_directory(path) || !fs::is_regular_file(config)) return false;
    return is_encoder_kind(model_kind(io::read_json_file(config.string())));
  } catch (const std::exception&) {
    return false;  // unreadable or not JSON: not an encoder's, and whoever opens it says why
  }
}

SentenceEncoder::~SentenceEncoder() = default;

std::unique_ptr<SentenceEncoder> SentenceEncoder::open(const std::string& dir, const EncoderOptions& options) {
  const fs::path root(dir);
  // std::filesystem's exceptions quote whole paths: a path that cannot be looked up (too long,
  // not searchable) is "not found" here instead.
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    value_error(escaped_path(dir) + (fs::exists(root, ec) ? ": a file (decoders come as GGUF or safetensors files); " : ": not found; ") +
                "a sentence encoder is a Hugging Face directory (config.json, model.safetensors, tokenizer.json) "
                "of a BERT-family model or EmbeddingGemma");
  if (!fs::exists(root / "config.json", ec)) value_error(escaped_path(dir) + ": no config.json (a sentence encoder's directory needs it)");
  // The config first: a decoder's directory is named as one whatever else it holds.
  const json config_json = io::read_json_file((root / "config.json").string());
  const auto kind = model_kind(config_json);
  std::unique_ptr<SentenceEncoder> e(new SentenceEncoder());
  BertConfig bert;
  LlamaConfig gemma;
  int64_t dim = 0, max_positions = 0;
  if (kind.first == "gemma3_text" || kind.first == "gemma3") {
    gemma = llama_config_from_hf(config_json);
    if (!gemma.bidirectional)
      value_error(escaped_path(dir) + ": a Gemma 3 that attends one way is a decoder (a language model), not a sentence "
                  "encoder; EmbeddingGemma's config.json says use_bidirectional_attention");
    e->family_ = "gemma3";
    e->vocab_ = gemma.vocab;
    dim = gemma.dim, max_positions = gemma.context;
  } else {
    bert = bert_config_from_hf(config_json);  // anything else not BERT is refused here, named
    e->family_ = "bert";
    e->vocab_ = bert.vocab;
    dim = bert.dim, max_positions = bert.max_positions;
  }
  for (const char* f : {"model.safetensors", "tokenizer.json"})
    if (!fs::exists(root / f, ec)) value_error(escaped_path(dir) + ": no " + f + " (a sentence encoder's directory needs it)");
  if (options.max_batch < 1 || options.max_batch > 4096)
    value_error("sentence encoder: a batch of 1 to 4096 sentences, not " + std::to_string(options.max_batch));
  e->options_ = options;
  e->sentence_ = sentence_config_from_dir(dir, max_positions, dim);
  e->normalize_ = options.normalize.value_or(e->sentence_.normalize);
  e->tokenizer_ = std::make_unique<text::Tokenizer>(text::from_hf_tokenizer_json((root / "tokenizer.json").string()));
  // A tokenizer with a sentence's first and last tokens, inside the embeddings (a token past them,
  // such as Gemma's image token, is refused when a text asks for it: embed_ids).
  for (const int32_t id : e->tokenizer_->encode_sentence("", 2))
    if (id >= e->vocab_)
      value_error(escaped_path(dir) + ": tokenizer.json's token " + std::to_string(id) +
                  " that begins or ends each sentence is outside the model's " + std::to_string(e->vocab_) + " embeddings");

  const io::SafetensorsFile file = io::SafetensorsFile::open((root / "model.safetensors").string());
  // The model's own tensors, under the graph's paths.
  StateDict model_tensors;
  if (e->family_ == "gemma3") {
    e->model_ = std::make_unique<Gemma3Encoder>(gemma, e->sentence_, e->normalize_, options.precision);
    StateDict named;
    for (const io::SafetensorsTensorInfo& t : file.tensors()) named.insert(t.name, file.tensor(t.name));
    model_tensors = llama_state_dict(named, "gemma3");
  } else {
    e->model_ = std::make_unique<BertModel>(bert, e->sentence_, e->normalize_, options.precision);
    // Only the tensors the graph holds (the file also has position_ids and the unused pooler),
    // under their names or with a "bert." prefix.
    for (const auto& [path, resident] : e->model_->held()) {
      const std::string name = BertModel::hf_name(path);
      if (file.find_tensor(name))
        model_tensors.insert(path, file.tensor(name));
      else if (file.find_tensor("bert." + name))
        model_tensors.insert(path, file.tensor("bert." + name));
    }
  }
  const auto modules = e->model_->module_tensors();
  std::map<std::string, io::SafetensorsFile> module_files;
  for (const auto& [path, resident] : e->model_->held()) {
    if (resident->is_state || resident->tensor.defined()) continue;  // the graph's own tables
    if (const auto m = modules.find(path); m != modules.end()) {
      const auto& [module, name] = m->second;
      auto it = module_files.find(module);
      if (it == module_files.end())
        it = module_files.emplace(module, io::SafetensorsFile::open((root / module / "model.safetensors").string())).first;
      if (!it->second.find_tensor(name))
        value_error(escaped_path(dir + "/" + module + "/model.safetensors") + ": no tensor " + name);
      e->weights_.insert(path, it->second.tensor(name));
    } else if (model_tensors.contains(path)) {
      e->weights_.insert(path, model_tensors.at(path));
    } else {
      value_error(escaped_path(dir + "/model.safetensors") + ": no tensor for " + path +
                  (e->family_ == "bert" ? " (" + BertModel::hf_name(path) + ")" : std::string()));
    }
  }
  e->model_->load_state_dict(e->weights_);
  return e;
}

int64_t SentenceEncoder::dim() const { return model_->output_dim(); }

std::string SentenceEncoder::prompt(const std::optional<std::string>& name) const {
  const std::optional<std::string>& chosen = name ? name : sentence_.default_prompt;
  if (!chosen || chosen->empty()) return "";
  const auto it = sentence_.prompts.find(*chosen);
  if (it == sentence_.prompts.end()) {
    std::string known;
    for (const auto& [n, text] : sentence_.prompts) known += (known.empty() ? "" : ", ") + n;
    value_error("sentence encoder: no prompt named " + escaped(*chosen, 60) + " (the model's prompts: " +
                (known.empty() ? std::string("none") : known) + ")");
  }
  return it->second;
}

int64_t SentenceEncoder::bucket(int64_t tokens) const {
  // 16, 20, 24, 28, 32, then 48, 64, 96, ...: a sentence pads by at most a third of its bucket
  // (a fifth on average), and a short one by at most 3 tokens. The steps of a third alone padded
  // a 20-token sentence to 24, a sixth of a batch's work spent on padding (20-token sentences in
  // batches of 32: 61-71 a second with 24, 72-87 with 20; bench_embed_speed, EmbeddingGemma).
  // Each bucket is a compiled version at most per batch size, 17 of them up to 2048 tokens.
  if (tokens <= 32) return std::min((std::max<int64_t>(tokens, 16) + 3) / 4 * 4, sentence_.max_seq_length);
  int64_t b = 32;
  while (b < tokens) b = b % 3 == 0 ? b / 3 * 4 : b / 2 * 3;
  return std::min(b, sentence_.max_seq_length);
}

std::vector<int32_t> SentenceEncoder::ids(const std::string& text, const std::string& prompt) const {
  return tokenizer_->encode_sentence(prompt + text, size_t(sentence_.max_seq_length));
}

std::vector<std::vector<float>> SentenceEncoder::embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                                           const std::function<void(size_t, size_t)>& progress) {
  const int64_t dim = model_->output_dim();
  for (const auto& s : ids) {
    if (s.empty() || int64_t(s.size()) > sentence_.max_seq_length)
      value_error("sentence encoder: a sentence of " + std::to_string(s.size()) + " ids (1 to max_seq_length " +
                  std::to_string(sentence_.max_seq_length) + ")");
    for (const int32_t id : s)
      if (id < 0 || id >= vocab_)
        value_error("sentence encoder: token id " + std::to_string(id) + " is outside the vocabulary of " +
                    std::to_string(vocab_));
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
  const std::string before = prompt();
  for (const std::string& t : texts) all.push_back(ids(t, before));
  return embed_ids(all, progress);
}

void truncate_dimensions(std::vector<std::vector<float>>& vectors, int64_t dims, bool renormalise) {
  for (std::vector<float>& v : vectors) {
    if (dims < 1 || dims > int64_t(v.size()))
      value_error("dimensions " + std::to_string(dims) + ": the vectors have " + std::to_string(v.size()) +
                  " (a smaller size from 1 cuts them, Matryoshka style)");
    v.resize(size_t(dims));
    if (!renormalise) continue;
    double norm = 0;
    for (const float x : v) norm += double(x) * double(x);
    const double scale = norm > 0 ? 1 / std::sqrt(norm) : 0;
    for (float& x : v) x = float(double(x) * scale);
  }
}

}  // namespace iron::models
