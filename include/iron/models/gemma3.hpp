// Gemma 3 as an IRON graph, on the decoder skeleton (decoder.hpp): embeddings scaled by
// sqrt(dim); RMSNorm before and after attention and the feed-forward; RMSNorm on each query and
// key head before RoPE; a GELU-tanh gated feed-forward; five of every six layers attending over
// a sliding window with their own RoPE base, the sixth over every position; tied embeddings.
#pragma once

#include "iron/models/decoder.hpp"
#include "iron/models/llama.hpp"

namespace iron::models {

/// Llama's q, k, v and o, and each head's RMSNorm weight for queries and keys.
class Gemma3Attention : public LlamaAttention {
 public:
  explicit Gemma3Attention(const LlamaConfig& c);
  Param q_norm, k_norm;  // (head_dim,)
};

class Gemma3Block : public DecoderBlock {
 public:
  Gemma3Block(const LlamaConfig& c, const LlamaOptions& options);
  Param attn_norm;
  Gemma3Attention attn;
  Param post_attn_norm, ffn_norm;
  LlamaFeedForward ffn;  // the same gate, up and down; GELU-tanh where Llama has SiLU
  Param post_ffn_norm;
};

class Gemma3Model : public DecoderModel {
 public:
  Gemma3Model(const LlamaConfig& config, const LlamaOptions& options = {});

  std::vector<std::unique_ptr<Gemma3Block>> layers;
  Weight global_rope_table, local_rope_table;  // (context + chunk, head_dim) each
  Weight embed_scale;                          // (dim,): sqrt(dim) in every entry

 private:
  Handle block(size_t layer, Handle x, const Rows& at, int64_t n) override;
  Handle embedded(Handle x) override;
};

}  // namespace iron::models
