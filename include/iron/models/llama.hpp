// The Llama family as an IRON graph (decoder.hpp holds what every family shares): RMSNorm before
// attention and the SwiGLU feed-forward, RoPE on queries and keys, grouped-query attention.
#pragma once

#include "iron/models/decoder.hpp"

namespace iron::models {

class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& c);
  Param q, k, v, o;
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
