#include "iron/models/llama_config.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "iron/error.hpp"
#include "iron/io/gguf.hpp"

namespace iron::models {
namespace {

// Far above any real model, low enough that products of them cannot overflow int64.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxDim = int64_t(1) << 17;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 4096;
constexpr int64_t kMaxFfn = int64_t(1) << 20;
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxContext = int64_t(1) << 24;

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void check_count(const std::string& where, const std::string& what, int64_t value, int64_t max) {
  if (value <= 0)
    value_error(where + ": " + what + " is " + std::to_string(value) + "; it must be positive");
  if (value > max)
    value_error(where + ": " + what + " is " + std::to_string(value) + ", above the limit " +
                std::to_string(max));
}

}  // namespace

void validate(const LlamaConfig& c, const std::string& where) {
  check_count(where, "the layer count", c.layers, kMaxLayers);
  check_count(where, "the hidden size (dim)", c.dim, kMaxDim);
  check_count(where, "the head count", c.heads, kMaxHeads);
  check_count(where, "the key/value head count", c.kv_heads, kMaxHeads);
  check_count(where, "the head size (head_dim)", c.head_dim, kMaxHeadDim);
  check_count(where, "the feed-forward size", c.ffn, kMaxFfn);
  check_count(where, "the vocabulary size", c.vocab, kMaxVocab);
  check_count(where, "the context length", c.context, kMaxContext);
  check_count(where, "the rotated dims per head (rope_dims)", c.rope_dims, kMaxHeadDim);
  if (c.heads % c.kv_heads != 0)
    value_error(where + ": " + std::to_string(c.heads) + " heads are not a multiple of " +
                std::to_string(c.kv_heads) + " key/value heads");
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    value_error(where + ": rope_dims " + std::to_string(c.rope_dims) +
                " must be even and at most head_dim " + std::to_string(c.head_dim));
  if (!std::isfinite(c.rope_base) || c.rope_base <= 1)
    value_error(where + ": the RoPE base " + number(c.rope_base) + " must be finite and above 1");
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0 || c.rms_eps >= 1)
    value_error(where + ": the RMSNorm epsilon " + number(c.rms_eps) + " must be in (0, 1)");
  if (!c.sliding.empty() && int64_t(c.sliding.size()) != c.layers)
    value_error(where + ": " + std::to_string(c.sliding.size()) + " layer types for " + std::to_string(c.layers) +
                " layers");
  for (bool local : c.sliding)
    if (local) check_count(where, "the sliding window", c.sliding_window, kMaxContext);
  if (!std::isfinite(c.rope_local_base) || c.rope_local_base <= 1)
    value_error(where + ": the local RoPE base " + number(c.rope_local_base) + " must be finite and above 1");
  if (!std::isfinite(c.attention_scale) || c.attention_scale < 0)
    value_error(where + ": the attention scale " + number(c.attention_scale) + " must be finite and not negative");
  if (c.rope_mode != "adjacent" && c.rope_mode != "halves")
    value_error(where + ": unknown RoPE mode '" + escaped(c.rope_mode) +
                "' (expected 'adjacent' or 'halves')");
}

std::string LlamaConfig::describe() const {
  std::ostringstream out;
  out << architecture << ": " << layers << " layers, dim " << dim << ", " << heads << " heads ("
      << kv_heads << " kv, head_dim " << head_dim << "), ffn " << ffn << ", vocab " << vocab
      << ", context " << context << ", rope " << rope_mode << " base " << number(rope_base)
      << " dims " << rope_dims << ", rms_eps " << number(rms_eps) << ", "
      << (tied_embeddings ? "tied embeddings" : "separate output weight");
  int64_t local = 0;
  for (bool b : sliding) local += b;
  if (local > 0)
    out << ", " << local << " of " << layers << " layers sliding over " << sliding_window
        << " positions (rope base " << number(rope_local_base) << ")";
  if (attention_scale > 0) out << ", attention scale " << number(attention_scale);
  if (bidirectional) out << ", attending both ways (a sentence encoder)";
  return out.str();
}

// ---- GGUF -------------------------------------------------------------------------------

LlamaConfig llama_config_from_gguf(const io::GgufFile& gguf) {
  const std::string where = escaped_path(gguf.path());
  const std::optional<std::string> arch = gguf.get_string("general.architecture");
  if (!arch) value_error(where + ": metadata key 'general.architecture' is missing");
  if (*arch != "llama" && *arch != "gemma3" && *arch != "qwen2")
    value_error(where + ": general.architecture is '" + escaped(*arch) +
                "', not an architecture IRON runs (expected 'llama', 'gemma3' or 'qwen2')");
  const std::string prefix = *arch + ".";
  auto optional_int = [&](const std::string& key) { return gguf.get_int(prefix + key); };
  auto required_int = [&](const std::string& key) {
    const std::optional<int64_t> value = optional_int(key);
    if (!value) value_error(where + ": metadata key '" + escaped(prefix + key) + "' is missing");
    return *value;
  };
  // Each count is checked as it is read, so an error names the key it came from.
  auto counted = [&](const std::string& key, int64_t value, int64_t max) {
    check_count(where, "'" + prefix + key + "'", value, max);
    return value;
  };

  LlamaConfig c;
  c.architecture = *arch;
  c.rope_mode = "adjacent";
  c.layers = counted("block_count", required_int("block_count"), kMaxLayers);
  c.dim = counted("embedding_length", required_int("embedding_length"), kMaxDim);
  c.heads = counted("attention.head_count", required_int("attention.head_count"), kMaxHeads);
  c.kv_heads = counted("attention.head_count_kv",
                       optional_int("attention.head_count_kv").value_or(c.heads), kMaxHeads);
  c.ffn = counted("feed_forward_length", required_int("feed_forward_length"), kMaxFfn);
  c.context = counted("context_length", required_int("context_length"), kMaxContext);
  const std::optional<int64_t> key_length = optional_int("attention.key_length");
  if (!key_length && c.dim % c.heads != 0)
    value_error(where + ": '" + prefix + "embedding_length' " + std::to_string(c.dim) +
                " is not a multiple of '" + prefix + "attention.head_count' " +
                std::to_string(c.heads));
  c.head_dim = counted("attention.key_length", key_length.value_or(c.dim / c.heads), kMaxHeadDim);
  if (const auto value_length = optional_int("attention.value_length");
      value_length && *value_length != c.head_dim)
    value_error(where + ": '" + prefix + "attention.value_length' " +
                std::to_string(*value_length) + " differs from the key length " +
                std::to_string(c.head_dim));
  c.rope_dims = counted("rope.dimension_count",
                        optional_int("rope.dimension_count").value_or(c.head_dim), kMaxHeadDim);
  c.rope_base = gguf.get_float(prefix + "rope.freq_base").value_or(10000.0);
  c.rms_eps = gguf.get_float(prefix + "attention.layer_norm_rms_epsilon")
                  .value_or(*arch == "gemma3" ? kGemma3Defaults.rms_eps
                            : *arch == "qwen2"  ? kQwen2DefaultRmsEps
                                                : 1e-5);
  // GGUF stores Gemma's and Qwen2's q and k rows unpermuted (only llama.cpp's llama converter
  // permutes them): RoPE pairs (i, i + d/2), llama.cpp's NEOX mode.
  if (*arch == "qwen2") c.rope_mode = "halves";
  if (*arch == "gemma3") {
    c.rope_mode = "halves";
    c.sliding_window = counted("attention.sliding_window",
                               optional_int("attention.sliding_window").value_or(kGemma3Defaults.sliding_window),
                               kMaxContext);
    c.rope_local_base = kGemma3Defaults.rope_local_base;
    for (int64_t i = 0; i < c.layers; ++i) c.sliding.push_back((i + 1) % kGemma3Defaults.global_every != 0);
  }
  if (const auto scaling = gguf.get_string(prefix + "rope.scaling.type");
      scaling && *scaling != "none")
    value_error(where + ": RoPE scaling '" + escaped(*scaling) + "' ('" + escaped(prefix) +
                "rope.scaling.type') is not supported");

  const io::GgufTensorInfo* embed = gguf.find_tensor("token_embd.weight");
  if (const auto vocab = optional_int("vocab_size")) {
    c.vocab = counted("vocab_size", *vocab, kMaxVocab);
  } else if (gguf.find("tokenizer.ggml.tokens")) {
    c.vocab = counted("vocab_size (from tokenizer.ggml.tokens)",
                      int64_t(gguf.get_strings("tokenizer.ggml.tokens").size()), kMaxVocab);
  } else if (embed && embed->dims.size() == 2) {
    c.vocab = embed->dims[1];
  } else {
    value_error(where + ": the vocabulary size is unknown (no '" + prefix +
                "vocab_size', no tokenizer.ggml.tokens, no token_embd.weight)");
  }
  validate(c, where);

  // The embedding and output weights must agree with the hyperparameters.
  auto check_matrix = [&](const io::GgufTensorInfo* t) {
    if (!t) return;
    if (t->dims.size() != 2 || t->dims[0] != c.dim || t->dims[1] != c.vocab)
      value_error(where + ": tensor '" + escaped(t->name) + "' is not " + std::to_string(c.dim) + "x" +
                  std::to_string(c.vocab) + " (ggml order) as the hyperparameters say");
  };
  check_matrix(embed);
  const io::GgufTensorInfo* output = gguf.find_tensor("output.weight");
  check_matrix(output);
  c.tied_embeddings = output == nullptr;
  return c;
}

// ---- Hugging Face config.json -------------------------------------------------------------

namespace {

using nlohmann::json;

const json* member(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> hf_int(const json& config, const char* key) {
  const json* value = member(config, key);
  if (!value) return std::nullopt;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      value_error("config.json: '" + std::string(key) + "' is too large");
    return int64_t(u);
  }
  if (!value->is_number_integer())
    value_error("config.json: '" + std::string(key) + "' is " + escaped(value->dump()) + ", not an integer");
  return value->get<int64_t>();
}

int64_t hf_required_int(const json& config, const char* key) {
  const std::optional<int64_t> value = hf_int(config, key);
  if (!value) value_error("config.json: the key '" + std::string(key) + "' is missing");
  return *value;
}

std::optional<double> hf_float(const json& config, const char* key) {
  const json* value = member(config, key);
  if (!value) return std::nullopt;
  if (!value->is_number())
    value_error("config.json: '" + std::string(key) + "' is " + escaped(value->dump()) + ", not a number");
  return value->get<double>();
}

// Gemma 3's own keys: which layers slide, over how many positions, their RoPE base, the query
// scale; the rest of Gemma 3's config.json reads as Llama's does.
void read_gemma3_hf(const json& config, LlamaConfig& c) {
  if (const json* act = member(config, "hidden_activation");
      act && (!act->is_string() || act->get<std::string>() != "gelu_pytorch_tanh"))
    value_error("config.json: hidden_activation " + escaped(act->dump()) + " is not Gemma 3's gelu_pytorch_tanh");
  for (const char* cap : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (const json* v = member(config, cap); v && !v->is_null())
      value_error(std::string("config.json: '") + cap + "' " + escaped(v->dump()) + " is not supported");
  c.sliding_window = hf_int(config, "sliding_window").value_or(kGemma3Defaults.sliding_window);
  if (const json* both = member(config, "use_bidirectional_attention")) {
    if (!both->is_boolean())
      value_error("config.json: 'use_bidirectional_attention' is " + escaped(both->dump()) + ", not a boolean");
    c.bidirectional = both->get<bool>();
  }
  c.rope_local_base = hf_float(config, "rope_local_base_freq").value_or(kGemma3Defaults.rope_local_base);
  c.rms_eps = hf_float(config, "rms_norm_eps").value_or(kGemma3Defaults.rms_eps);
  if (const auto scalar = hf_float(config, "query_pre_attn_scalar")) {
    if (!(*scalar > 0)) value_error("config.json: 'query_pre_attn_scalar' must be positive");
    c.attention_scale = 1.0 / std::sqrt(*scalar);
  }
  if (const json* types = member(config, "layer_types"); types && !types->is_null()) {
    if (!types->is_array()) value_error("config.json: 'layer_types' is not a list");
    for (const json& t : *types) {
      const std::string name = t.is_string() ? t.get<std::string>() : std::string();
      if (name != "sliding_attention" && name != "full_attention")
        value_error("config.json: a layer type " + escaped(t.dump()) +
                    " is neither \"sliding_attention\" nor \"full_attention\"");
      c.sliding.push_back(name == "sliding_attention");
    }
  } else {
    const int64_t every = hf_int(config, "sliding_window_pattern").value_or(kGemma3Defaults.global_every);
    check_count("config.json", "'sliding_window_pattern'", every, kMaxLayers);
    for (int64_t i = 0; i < c.layers; ++i) c.sliding.push_back((i + 1) % every != 0);
  }
}

// Qwen2's own keys, each refused where it asks for what the graph does not do: a sliding window
// (Qwen2.5 ships with it off), an activation other than SiLU.
void read_qwen2_hf(const json& config) {
  if (const json* act = member(config, "hidden_act");
      act && (!act->is_string() || act->get<std::string>() != "silu"))
    value_error("config.json: hidden_act " + escaped(act->dump()) + " is not Qwen2's silu");
  if (const json* swa = member(config, "use_sliding_window")) {
    if (!swa->is_boolean())
      value_error("config.json: 'use_sliding_window' is " + escaped(swa->dump()) + ", not a boolean");
    if (swa->get<bool>()) value_error("config.json: Qwen2's sliding window (use_sliding_window) is not supported");
  }
}

}  // namespace

LlamaConfig llama_config_from_hf(const nlohmann::json& config) {
  if (!config.is_object()) value_error("config.json: not a JSON object");
  LlamaConfig c;
  c.architecture = "llama";
  if (const json* type = member(config, "model_type")) {
    const std::string name = type->is_string() ? type->get<std::string>() : std::string();
    // A multimodal Gemma 3 holds its language model's config in text_config.
    if (name == "gemma3" && member(config, "text_config")) return llama_config_from_hf(config["text_config"]);
    if (name == "gemma3_text" || name == "gemma3") {
      c.architecture = "gemma3";
    } else if (name == "qwen2") {
      c.architecture = "qwen2";
    } else if (name != "llama") {
      value_error("config.json: model_type is " + escaped(type->dump()) +
                  ", not a model IRON runs (expected \"llama\", \"gemma3_text\" or \"qwen2\")");
    }
  }
  const bool gemma = c.architecture == "gemma3";
  c.rope_mode = "halves";
  auto count = [&](const char* key, int64_t value, int64_t max) {
    std::string what = "'";
    what += key;
    what += '\'';
    check_count("config.json", what, value, max);
    return value;
  };
  c.layers = count("num_hidden_layers", hf_required_int(config, "num_hidden_layers"), kMaxLayers);
  c.dim = count("hidden_size", hf_required_int(config, "hidden_size"), kMaxDim);
  c.heads = count("num_attention_heads", hf_required_int(config, "num_attention_heads"), kMaxHeads);
  c.kv_heads = count("num_key_value_heads", hf_int(config, "num_key_value_heads").value_or(c.heads),
                     kMaxHeads);
  c.ffn = count("intermediate_size", hf_required_int(config, "intermediate_size"), kMaxFfn);
  c.vocab = count("vocab_size", hf_required_int(config, "vocab_size"), kMaxVocab);
  c.context = count("max_position_embeddings", hf_required_int(config, "max_position_embeddings"),
                    kMaxContext);
  const std::optional<int64_t> head_dim = hf_int(config, "head_dim");
  if (!head_dim && c.dim % c.heads != 0)
    value_error("config.json: 'hidden_size' " + std::to_string(c.dim) +
                " is not a multiple of 'num_attention_heads' " + std::to_string(c.heads));
  c.head_dim = count("head_dim", head_dim.value_or(c.dim / c.heads), kMaxHeadDim);
  c.rope_dims = c.head_dim;
  c.rope_base = hf_float(config, "rope_theta").value_or(10000.0);
  c.rms_eps = hf_float(config, "rms_norm_eps").value_or(1e-6);
  c.tied_embeddings = gemma;  // transformers' default: Gemma ties, Llama does not
  if (const json* tie = member(config, "tie_word_embeddings")) {
    if (!tie->is_boolean())
      value_error("config.json: 'tie_word_embeddings' is " + escaped(tie->dump()) + ", not a boolean");
    c.tied_embeddings = tie->get<bool>();
  }
  if (const json* scaling = member(config, "rope_scaling"); scaling && !scaling->is_null())
    value_error("config.json: RoPE scaling " + escaped(scaling->dump()) + " is not supported");
  if (gemma) read_gemma3_hf(config, c);
  if (c.architecture == "qwen2") read_qwen2_hf(config);
  validate(c, "config.json");
  return c;
}

// ---- tensor names -------------------------------------------------------------------------

namespace {

// "12." at the front of `rest`: the layer number (canonical decimal) and what follows the dot.
std::optional<std::pair<std::string_view, std::string_view>> layer_prefix(std::string_view rest) {
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
  const std::string_view digits = rest.substr(0, dot);
  for (char ch : digits)
    if (ch < '0' || ch > '9') return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  return std::pair{digits, rest.substr(dot + 1)};
}

const std::map<std::string_view, std::string_view>& gguf_layer_names() {
  static const std::map<std::string_view, std::string_view> names = {
      {"attn_q.weight", "attn.q"},       {"attn_k.weight", "attn.k"},
      {"attn_v.weight", "attn.v"},       {"attn_output.weight", "attn.o"},
      {"attn_norm.weight", "attn_norm"}, {"ffn_gate.weight", "ffn.gate"},
      {"ffn_up.weight", "ffn.up"},       {"ffn_down.weight", "ffn.down"},
      {"ffn_norm.weight", "ffn_norm"},
      // Gemma 3: norms on queries and keys, and after attention and the feed-forward.
      {"attn_q_norm.weight", "attn.q_norm"},
      {"attn_k_norm.weight", "attn.k_norm"},
      {"post_attention_norm.weight", "post_attn_norm"},
      {"post_ffw_norm.weight", "post_ffn_norm"},
  };
  return names;
}

// Qwen2's GGUF names: Llama's, and a bias on each of q, k and v.
const std::map<std::string_view, std::string_view>& gguf_qwen2_layer_names() {
  static const std::map<std::string_view, std::string_view> names = [] {
    std::map<std::string_view, std::string_view> m = gguf_layer_names();
    m["attn_q.bias"] = "attn.q_bias";
    m["attn_k.bias"] = "attn.k_bias";
    m["attn_v.bias"] = "attn.v_bias";
    return m;
  }();
  return names;
}

const std::map<std::string_view, std::string_view>& hf_layer_names() {
  static const std::map<std::string_view, std::string_view> names = {
      {"self_attn.q_proj.weight", "attn.q"},
      {"self_attn.k_proj.weight", "attn.k"},
      {"self_attn.v_proj.weight", "attn.v"},
      {"self_attn.o_proj.weight", "attn.o"},
      {"input_layernorm.weight", "attn_norm"},
      {"mlp.gate_proj.weight", "ffn.gate"},
      {"mlp.up_proj.weight", "ffn.up"},
      {"mlp.down_proj.weight", "ffn.down"},
      {"post_attention_layernorm.weight", "ffn_norm"},
  };
  return names;
}

// Gemma 3's Hugging Face names: Llama's, but its post_attention_layernorm follows attention
// (Llama's is the feed-forward's), and it has norms on queries and keys and around the
// feed-forward.
const std::map<std::string_view, std::string_view>& hf_gemma3_layer_names() {
  static const std::map<std::string_view, std::string_view> names = [] {
    std::map<std::string_view, std::string_view> m = hf_layer_names();
    m["post_attention_layernorm.weight"] = "post_attn_norm";
    m["pre_feedforward_layernorm.weight"] = "ffn_norm";
    m["post_feedforward_layernorm.weight"] = "post_ffn_norm";
    m["self_attn.q_norm.weight"] = "attn.q_norm";
    m["self_attn.k_norm.weight"] = "attn.k_norm";
    return m;
  }();
  return names;
}

// Qwen2's Hugging Face names: Llama's, and the biases of q_proj, k_proj and v_proj.
const std::map<std::string_view, std::string_view>& hf_qwen2_layer_names() {
  static const std::map<std::string_view, std::string_view> names = [] {
    std::map<std::string_view, std::string_view> m = hf_layer_names();
    m["self_attn.q_proj.bias"] = "attn.q_bias";
    m["self_attn.k_proj.bias"] = "attn.k_bias";
    m["self_attn.v_proj.bias"] = "attn.v_bias";
    return m;
  }();
  return names;
}

std::optional<std::string> layer_path(std::string_view name, std::string_view prefix,
                                      const std::map<std::string_view, std::string_view>& names) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const auto layer = layer_prefix(name.substr(prefix.size()));
  if (!layer) return std::nullopt;
  const auto it = names.find(layer->second);
  if (it == names.end()) return std::nullopt;
  return "layers." + std::string(layer->first) + "." + std::string(it->second);
}

}  // namespace

std::string llama_tensor_path(const std::string& name, const std::string& architecture) {
  static const std::map<std::string_view, std::string_view> globals = {
      {"token_embd.weight", "embed"}, {"model.embed_tokens.weight", "embed"},
      {"output_norm.weight", "norm"}, {"model.norm.weight", "norm"},
      // A text model saved alone (EmbeddingGemma's Gemma3TextModel) has no "model." prefix.
      {"embed_tokens.weight", "embed"}, {"norm.weight", "norm"},
      {"output.weight", "output"},    {"lm_head.weight", "output"},
  };
  if (const auto it = globals.find(name); it != globals.end()) return std::string(it->second);
  const bool qwen2 = architecture == "qwen2";
  if (auto path = layer_path(name, "blk.", qwen2 ? gguf_qwen2_layer_names() : gguf_layer_names())) return *path;
  const auto& hf = architecture == "gemma3" ? hf_gemma3_layer_names()
                   : qwen2                  ? hf_qwen2_layer_names()
                                            : hf_layer_names();
  // A multimodal Gemma 3 keeps its language model under language_model.
  for (const char* prefix : {"model.layers.", "language_model.model.layers.", "layers."})
    if (auto path = layer_path(name, prefix, hf)) return *path;
  if (name.rfind("language_model.", 0) == 0) return llama_tensor_path(name.substr(15), architecture);
  return name;
}

StateDict llama_state_dict(const StateDict& checkpoint, const std::string& architecture) {
  StateDict out;
  for (const auto& [name, tensor] : checkpoint.items()) {
    std::string path = llama_tensor_path(name, architecture);
    if (out.contains(path))
      value_error("checkpoint tensor '" + escaped(name) + "' maps to '" + escaped(path) +
                  "', which another tensor already took");
    // Gemma's RMSNorm multiplies by (1 + w): Hugging Face stores w, llama.cpp's converter w + 1
    // (as every other family's norm weight), so a Hugging Face norm gets its 1 here, in f32.
    const bool hf_gemma_norm = architecture == "gemma3" && name.find("norm.weight") != std::string::npos &&
                               name.rfind("blk.", 0) != 0 && name != "output_norm.weight";
    if (hf_gemma_norm) {
      std::vector<float> values = tensor.to_floats();
      for (float& v : values) v += 1.0f;
      out.insert(std::move(path), Tensor::from(values, tensor.shape()));
      continue;
    }
    out.insert(std::move(path), tensor);
  }
  return out;
}

}  // namespace iron::models
