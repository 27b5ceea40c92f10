// Gemma 3 as an IRON graph, on the decoder skeleton (decoder.hpp): embeddings scaled by
// sqrt(dim); RMSNorm before and after attention and the feed-forward; RMSNorm on each query and
// key head before RoPE; a GELU-tanh gated feed-forward; five of every six layers attending over
// a sliding window with their own RoPE base, the sixth over every position; tied embeddings.
// The same blocks make an encoder (EmbeddingGemma: Gemma3Encoder): bidirectional attention, the
// windowed layers seeing a window on both sides of each token.
#pragma once

#include "iron/models/decoder.hpp"
#include "iron/models/encoder.hpp"
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
  /// An encoder's block: the same params, no KV cache.
  explicit Gemma3Block(const LlamaConfig& c);

  /// The queries, keys and values of x's `n` rows (heads of head_dim, bounded as x): x
  /// normalised and projected, each query and key head normalised and turned by RoPE `table`'s
  /// rows (one per row of x). `k_into`, `v_into`: where the keys and values are written in place
  /// (a decoder's f32 cache window), or empty.
  struct Projected {
    Handle q, k, v;
  };
  Projected project(const LlamaConfig& c, const Handle& x, int64_t n, const Handle& table, Precision p,
                    const Handle& k_into = {}, const Handle& v_into = {}) const;
  /// The rest of the block once attention has run: `attended` (n, heads, head_dim) projected,
  /// normalised and added to x, then the feed-forward likewise.
  Handle finish(const LlamaConfig& c, const Handle& x, int64_t n, const Handle& attended, Precision p) const;

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

/// EmbeddingGemma: Gemma 3's blocks as a sentence encoder (config.bidirectional). Every layer
/// attends both ways within its sentence; a sliding layer only to the tokens less than
/// encoder_window(config) from each token on either side. Each sentence's positions count from 0.
/// The embeddings scaled by sqrt(dim), the blocks, the final RMSNorm, then the
/// sentence-transformers pipeline (EncoderGraph).
class Gemma3Encoder : public EncoderGraph {
 public:
  Gemma3Encoder(const LlamaConfig& config, const SentenceConfig& sentence, bool normalize, Precision precision);
  ~Gemma3Encoder() override;
  Outputs body() override;
  int64_t max_positions() const override { return config_.context; }

  Param embed, norm;
  std::vector<std::unique_ptr<Gemma3Block>> layers;
  Weight global_rope_table, local_rope_table;  // (context, head_dim) each
  Weight embed_scale;                          // (dim,): sqrt(dim) in every entry

 private:
  LlamaConfig config_;
};

/// The bidirectional window of an encoder's sliding layers: transformers turns the config's
/// sliding_window w into w / 2 + 1 for bidirectional Gemma 3 (Gemma3TextConfig), a token seeing
/// those less than that far from it either way (its own and w / 2 each side).
int64_t encoder_window(const LlamaConfig& config);

}  // namespace iron::models
