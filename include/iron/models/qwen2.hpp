// Qwen2 and Qwen2.5 as an IRON graph, on the decoder skeleton (decoder.hpp): Llama's block (RMSNorm
// before attention and the SwiGLU feed-forward, RoPE on queries and keys, grouped-query attention)
// with a bias added to each of the q, k and v projections.
#pragma once

#include "iron/models/decoder.hpp"
#include "iron/models/llama.hpp"

namespace iron::models {

/// Llama's q, k, v and o, and the biases of q, k and v.
class Qwen2Attention : public LlamaAttention {
 public:
  explicit Qwen2Attention(const LlamaConfig& c);
  Param q_bias, k_bias, v_bias;  // (heads * head_dim,), (kv_heads * head_dim,) twice
};

class Qwen2Block : public DecoderBlock {
 public:
  Qwen2Block(const LlamaConfig& c, const LlamaOptions& options);
  Param attn_norm;
  Qwen2Attention attn;
  Param ffn_norm;
  LlamaFeedForward ffn;
};

class Qwen2Model : public DecoderModel {
 public:
  Qwen2Model(const LlamaConfig& config, const LlamaOptions& options = {});

  std::vector<std::unique_ptr<Qwen2Block>> layers;
  Weight rope_table;  // (context + chunk, head_dim): cosines then sines per position

 private:
  Handle block(size_t layer, Handle x, const Rows& at, int64_t n) override;
};

}  // namespace iron::models
