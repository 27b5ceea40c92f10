// The Llama family as an IRON graph (decoder.hpp holds what every family shares): RMSNorm before
// attention and the SwiGLU feed-forward, RoPE on queries and keys, grouped-query attention.
// Qwen2 and Qwen2.5 are this block with a bias on each of q, k and v (architecture "qwen2").
#pragma once

#include <optional>

#include "iron/models/decoder.hpp"

namespace iron::models {

class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& c);
  Param q, k, v, o;
  // Qwen2's biases of q, k and v ((heads * head_dim,), then (kv_heads * head_dim,) twice);
  // absent for Llama.
  std::optional<Param> q_bias, k_bias, v_bias;
};

class LlamaFeedForward : public Module {
 public:
  explicit LlamaFeedForward(const LlamaConfig& c);
  Param gate, up, down;
};

class LlamaBlock : public DecoderBlock {
 public:
  LlamaBlock(const LlamaConfig& c, const LlamaOptions& options);
  Param attn_norm;
  LlamaAttention attn;
  Param ffn_norm;
  LlamaFeedForward ffn;
};

class LlamaModel : public DecoderModel {
 public:
  LlamaModel(const LlamaConfig& config, const LlamaOptions& options = {});

  std::vector<std::unique_ptr<LlamaBlock>> layers;
  Weight rope_table;  // (context + chunk, head_dim): cosines then sines per position

 private:
  Handle block(size_t layer, Handle x, const Rows& at, int64_t n) override;
};

}  // namespace iron::models
