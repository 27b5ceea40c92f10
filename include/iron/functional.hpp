// Functions for a graph's body(), under torch.nn.functional's names. Each records the operator
// steps that compute it and returns their handle. Weights are (out, in), as torch.nn.Linear
// stores them. A handle's own + - * / are steps too, and matmul() of one row.
#pragma once

#include <optional>
#include <string>

#include "iron/handle.hpp"
#include "iron/module.hpp"
#include "iron/operator.hpp"
#include "iron/precision.hpp"
#include "iron/sampling.hpp"

namespace iron::functional {

/// x @ weight.T, plus `bias` on every row if given. One row runs on GEMV (always rounded once
/// from f32 sums); several rows on ProjectionGEMM at `precision`, or GEMM at HIGHEST. With
/// `into` (a dense view of as many elements and the same dtype, e.g. a KV-cache window) the
/// result is written there, and the returned handle is that view.
Handle linear(const Handle& x, const Handle& weight, const Handle& bias = {},
              Precision precision = Precision::highest, const Fields& gemv = {}, const Handle& into = {});
/// residual + x @ weight.T in one step (the matmul adds it before its one rounding): a
/// transformer block's residual connection.
Handle linear_residual(const Handle& x, const Handle& weight, const Handle& residual,
                       Precision precision = Precision::highest);

/// x over the RMS of its last axis, times `weight` if given; `eps` none is x's dtype's epsilon.
Handle rms_norm(const Handle& x, int64_t normalized_shape, const Handle& weight = {},
                std::optional<double> eps = {});

/// x minus its mean over the last axis, over its standard deviation, times `weight` plus `bias`.
Handle layer_norm(const Handle& x, int64_t normalized_shape, const Handle& weight = {},
                  const Handle& bias = {}, double eps = 1e-5);

/// x * sigmoid(x).
Handle silu(const Handle& x);
/// GELU, exact ("none") or by its tanh approximation ("tanh").
Handle gelu(const Handle& x, const std::string& approximate = "none");

/// x (rows, head_dim) or (rows, heads, head_dim) turned by RoPE, a row of angles (rows,
/// head_dim/2) per row. `mode` "adjacent" pairs (2i, 2i+1) or "halves" (i, i + head_dim/2).
Handle rope(const Handle& x, const Handle& angles, const std::string& mode = "adjacent");
/// As rope(), with a table of cosines then sines (rows, head_dim), computed once; `into` as in
/// linear().
Handle rope_cos_sin(const Handle& x, const Handle& table, const std::string& mode = "adjacent",
                    const Handle& into = {});
/// silu(gate) * up, in one step (a SwiGLU feed-forward's middle).
Handle silu_mul(const Handle& gate, const Handle& up);
/// gelu(gate, "tanh") * up, in one step (Gemma's GeGLU feed-forward's middle): the bits of the
/// two steps it stands for, and like silu_mul() merged by the planner into the matmuls making
/// gate and up.
Handle gelu_tanh_mul(const Handle& gate, const Handle& up);

/// Softmax over the last axis, of `scale` * x; entries past the axis's per-call bound are zero.
Handle softmax(const Handle& x, double scale = 1.0);
/// The index of the largest entry of a row of logits, as a one-element i32.
Handle argmax(const Handle& logits);
/// A token drawn from a row of logits (one-element i32): the top_k most likely (0: all), cut to
/// the smallest set reaching top_p, softmax at `temperature` (0: greedy), one draw keyed by the
/// 64-bit `seed` (a param) mixed with the per-call `step` and `position` (ops::sample_uniform,
/// the one mixing every device uses).
Handle sample(const Handle& logits, double temperature, int64_t top_k, double top_p, uint64_t seed,
              const Affine& step, const Affine& position);
/// As above, with the temperature, top_k, top_p and seed read each call from `settings`: a row
/// of kSampleSettingsWords i32 words (an input, or a state a call wrote), as sample_settings()
/// makes them. One compiled version then serves any settings, a server's every request.
Handle sample(const Handle& logits, const Handle& settings, const Affine& step, const Affine& position);
/// Words in a row of sampling settings (iron/sampling.hpp).
using iron::kSampleSettingsWords;
/// The settings row (kSampleSettingsWords,) i32 for sample(): the doubles and the 64-bit seed
/// travel bit for bit (16 bits a word; SamplingRow). Throws a value error unless temperature >= 0,
/// top_k >= 0 (below 2^31) and 0 < top_p <= 1.
Tensor sample_settings(double temperature, int64_t top_k, double top_p, uint64_t seed);
/// The sum of per-call expressions as a one-element i32 (a carried value of two values).
Handle scalar(const std::vector<Affine>& terms);
/// Causal grouped-query attention of q (rows, heads, head_dim) over the caches k_cache and v_cache
/// (ctx, kv_heads, head_dim), kv_heads dividing heads; query head h reads kv head
/// h / (heads / kv_heads). Row r of q sits at absolute position `start + r` and attends to cache
/// positions [0, start + r] (held to ctx); `start` is checked to lie in [0, ctx) each call.
/// Softmax of `scale` (none: 1/sqrt(head_dim)) times q.k, times v; q's per-call row bound holds
/// for the result, of q's shape and dtype. With a sliding `window` (> 0), a row attends only to
/// the last `window` positions up to its own, and only those are read. At Precision::medium the
/// CPU may round a decode step's queries to q8_0 blocks over q8_0 caches (int8 products).
Handle attention(const Handle& q, const Handle& k_cache, const Handle& v_cache, const Affine& start,
                 std::optional<double> scale = {}, int64_t window = 0, Precision precision = Precision::highest);
/// An encoder's bidirectional attention over a padded batch: q (rows, heads, head_dim), k and v
/// (rows, kv_heads, head_dim), the rows in segments of `segment` (one sentence each). Row r of
/// segment b attends to rows [b * segment, b * segment + lengths[b]) of k and v, where `lengths`
/// (rows / segment,) i32 is read per call (a graph input; each held to [0, segment]); rows at or
/// past their segment's length are zero. Softmax of `scale` (none: 1/sqrt(head_dim)) times q.k.
/// With a `window` W > 0, a row attends only to the rows less than W from it on either side (its
/// own and W - 1 each way: a causal window's W, both ways), as bidirectional sliding-window
/// layers do (EmbeddingGemma's); a window no shorter than the segment changes nothing and is
/// dropped. At Precision::medium the CPU may round q, k, v and the weights to bf16 (AMX tiles).
Handle segment_attention(const Handle& q, const Handle& k, const Handle& v, const Handle& lengths,
                         int64_t segment, std::optional<double> scale = {}, int64_t window = 0,
                         Precision precision = Precision::highest);
/// Mean pooling over a padded batch: x (rows, N) in segments of `segment` rows; row b of the
/// result (rows / segment, N) is the mean of the first lengths[b] rows of segment b (lengths as
/// in segment_attention(); an empty segment gives zeros).
Handle segment_mean(const Handle& x, const Handle& lengths, int64_t segment);
/// Where each row of a batched decode sits in a cache of `slots` regions of `slot_rows` rows:
/// slots[b] * slot_rows + positions[b] as (B,) i32, from slots and positions (B,) i32 (graph
/// inputs, checked on the host before each call to lie in [0, slots) and [0, slot_rows)). The
/// rows a scatter writes a call's keys to: `cache[slot_rows(...)].assign(k)`.
Handle slot_rows(const Handle& slots, const Handle& positions, int64_t slots_count, int64_t slot_rows);
/// A batched decode's attention: q (B, heads, head_dim), row b at position positions[b] of cache
/// slot slots[b] (both (B,) i32, read per call) of caches (slots * slot_rows, kv_heads, head_dim),
/// attends to its slot's keys up to its position (the last `window` of them, if given), as
/// attention() of that slot's rows alone at that start computes it, bit for bit.
/// `precision` as attention()'s.
Handle slot_attention(const Handle& q, const Handle& k_cache, const Handle& v_cache, const Handle& positions,
                      const Handle& slots, int64_t slot_rows, std::optional<double> scale = {}, int64_t window = 0,
                      Precision precision = Precision::highest);
/// A batch of draws: logits (B, vocab), `settings` (B, kSampleSettingsWords) i32 (a row of
/// sample_settings() each), and each row's counter `steps` and `positions` (B,) i32; row b draws
/// as sample(logits[b], settings[b], steps[b], positions[b]) would. (B,) i32.
Handle sample_rows(const Handle& logits, const Handle& settings, const Handle& steps, const Handle& positions);
/// A dense copy of any view (strided, gathered), optionally cast to `dtype`.
Handle copy(const Handle& x, std::optional<DType> dtype = {});

/// What a short causal conv carries between calls: `read`, the K - 1 rows before a call's
/// first; `write`, where the K - 1 ending it go; and the states a call stages them in,
/// `window` (2, chunk, channels) and `tail` (K - 1, channels).
struct ConvState {
  Handle read;
  Handle write;
  State window;
  State tail;
};

/// x (rows, channels) through a depth-wise causal filter of K taps (K, channels): output row t is
/// sum_k taps[k] * x[t - K + 1 + k]. When x's rows are bounded per call it is a prompt chunk of
/// at most `chunk` rows; otherwise x is one row, a decode step.
Handle causal_conv1d(const Handle& x, const Handle& taps, const ConvState& state);

}  // namespace iron::functional
