// The hyperparameters of a Llama-architecture model, read from a GGUF file's metadata or a Hugging
// Face config.json, and the mapping of either checkpoint's tensor names onto the model's paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "iron/io/checkpoint.hpp"

namespace iron::io {
class GgufFile;
}

namespace iron::models {

struct LlamaConfig {
  int64_t layers = 0;    // transformer blocks
  int64_t dim = 0;       // hidden size
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention when fewer than heads)
  int64_t head_dim = 0;  // dim == heads * head_dim
  int64_t ffn = 0;       // SwiGLU hidden size
  int64_t vocab = 0;
  int64_t context = 0;  // the trained (declared) context length
  double rope_base = 10000;
  double rms_eps = 1e-5;
  /// "adjacent": RoPE rotates pairs (2i, 2i+1) — GGUF llama, whose Q/K weights the converter
  /// permuted for llama.cpp's normal mode; "halves": pairs (i, i + rope_dims/2) — Hugging Face
  /// safetensors (rotate_half).
  std::string rope_mode = "adjacent";
  int64_t rope_dims = 0;         // rotated dims per head (usually head_dim)
  bool tied_embeddings = false;  // no separate output weight: the classifier is the embedding
  /// "llama" (Llama, SmolLM2, TinyLlama...), "gemma3" (Gemma 3's blocks: gemma3.hpp) or "qwen2"
  /// (Qwen2 and Qwen2.5: Llama's blocks with a bias on q, k and v; qwen2.hpp).
  std::string architecture = "llama";

  // Gemma 3. Where a checkpoint leaves these out, kGemma3Defaults gives Gemma 3's published values.
  /// Layer i attends only to the last `sliding_window` positions (its own included) when
  /// sliding[i]; the others ("global") attend to every earlier position. Empty: all global.
  std::vector<bool> sliding;
  int64_t sliding_window = 0;
  double rope_local_base = 10000;  // the RoPE base of sliding layers (global ones: rope_base)
  double attention_scale = 0;      // scores times this; 0: 1/sqrt(head_dim)
  /// Attention both ways (config.json's use_bidirectional_attention): a sentence encoder
  /// (EmbeddingGemma), which no decoder graph runs.
  bool bidirectional = false;

  bool is_sliding(int64_t layer) const { return size_t(layer) < sliding.size() && sliding[size_t(layer)]; }

  /// One line for logs and `iron info`.
  std::string describe() const;
};

/// Gemma 3's published values for what its checkpoints may leave out (from Google's Gemma 3
/// report and the reference configurations): one table, read by both loaders.
struct Gemma3Defaults {
  int64_t global_every = 6;         // layer i is global when (i + 1) % 6 == 0: five local, one global
  int64_t sliding_window = 512;     // keys a local layer sees (270M, 1B; 4B and up: 1024)
  double rope_local_base = 10000;   // local layers' RoPE base (global: the checkpoint's, 1e6)
  double rms_eps = 1e-6;
};
inline constexpr Gemma3Defaults kGemma3Defaults{};

/// Qwen2's RMSNorm epsilon where a GGUF leaves it out (transformers' Qwen2Config default, and
/// what every Qwen2 and Qwen2.5 checkpoint sets).
inline constexpr double kQwen2DefaultRmsEps = 1e-6;

/// Reads `general.architecture` ("llama", "gemma3" or "qwen2") and its hyperparameters, e.g. `llama.*`:
/// block_count, embedding_length, attention.head_count, feed_forward_length and context_length
/// are required; attention.head_count_kv (default: head_count), attention.key_length (default:
/// embedding_length / head_count), rope.dimension_count (default: head_dim), rope.freq_base
/// (default 10000) and attention.layer_norm_rms_epsilon (default 1e-5) are optional. The
/// vocabulary size is llama.vocab_size, else the length of tokenizer.ggml.tokens, else the rows
/// of token_embd.weight. Tied when there is no output.weight tensor. Every count is checked;
/// a value error names the file and the key. For gemma3 also `gemma3.attention.sliding_window`,
/// with kGemma3Defaults for the rest; RoPE pairs halves (llama.cpp's NEOX mode), and the norm
/// weights are read as stored (llama.cpp's converter has already added Gemma's 1 to them). qwen2
/// reads llama's keys (rms epsilon default kQwen2DefaultRmsEps) and pairs halves, as llama.cpp's
/// NEOX mode (its converter leaves Qwen2's q and k rows as Hugging Face has them).
LlamaConfig llama_config_from_gguf(const io::GgufFile& gguf);

/// Reads a Hugging Face config.json of a Llama model (model_type "llama" when given) or a Gemma 3
/// (model_type "gemma3_text", or "gemma3" with a text_config; then also sliding_window,
/// layer_types or sliding_window_pattern, rope_local_base_freq, query_pre_attn_scalar, with
/// kGemma3Defaults where absent; embeddings tied unless it says otherwise):
/// num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size and
/// max_position_embeddings are required; num_key_value_heads (default: num_attention_heads),
/// head_dim (default: hidden_size / num_attention_heads), rope_theta (default 10000),
/// rms_norm_eps (default 1e-6, as transformers) and tie_word_embeddings (default false) are
/// optional. RoPE scaling is refused. rope_mode is "halves". model_type "qwen2" reads as Llama's
/// (hidden_act, when given, must be silu; use_sliding_window true is refused).
LlamaConfig llama_config_from_hf(const nlohmann::json& config);

/// Checks the counts: positive, heads % kv_heads == 0, dim == heads * head_dim, rope_dims even
/// and at most head_dim, within sane upper bounds; a value error prefixed by `where` otherwise.
void validate(const LlamaConfig& config, const std::string& where = "llama config");

/// Renames a checkpoint's tensors to the model's dotted paths:
///   GGUF "token_embd.weight" / HF "model.embed_tokens.weight" -> "embed"
///   GGUF "output_norm.weight" / HF "model.norm.weight"        -> "norm"
///   GGUF "output.weight" / HF "lm_head.weight"                -> "output"
/// and per layer N ("blk.N." / "model.layers.N.") -> "layers.N." followed by attn.q attn.k attn.v
/// attn.o attn_norm ffn.gate ffn.up ffn.down ffn_norm. The tensors are shared, not copied; a name
/// it does not know is kept as it is (so load_state_dict reports it as unexpected).
/// Gemma 3 (`architecture` "gemma3") adds attn.q_norm, attn.k_norm, post_attn_norm and
/// post_ffn_norm, and names its Hugging Face norms as Gemma does (post_attention_layernorm is
/// then the norm after attention, pre_feedforward_layernorm the feed-forward's); its Hugging Face
/// norm weights w become 1 + w, as GGUF stores them. Qwen2 (`architecture` "qwen2") adds
/// attn.q_bias, attn.k_bias and attn.v_bias (GGUF "attn_q.bias", HF "self_attn.q_proj.bias"...).
StateDict llama_state_dict(const StateDict& checkpoint, const std::string& architecture = "llama");

/// The model path of one checkpoint tensor name, or the name itself when it is not a known name.
std::string llama_tensor_path(const std::string& checkpoint_name, const std::string& architecture = "llama");

}  // namespace iron::models
