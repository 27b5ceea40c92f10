// Running a Llama-family checkpoint: load it (weights stay memory-mapped), compile its prefill and
// decode versions, and generate: the prompt in chunks, then decode steps in a CarriedLoop while
// the host streams each token as it lands.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "iron/carried_loop.hpp"
#include "iron/io/checkpoint.hpp"
#include "iron/models/batch.hpp"
#include "iron/models/decoder.hpp"
#include "iron/profile.hpp"
#include "iron/text/tokenizer.hpp"

namespace iron::models {

struct RunnerOptions {
  LlamaOptions model;
  int threads = 0;  // 0: every core
  std::string device = "cpu";  // "cpu" or "vulkan" (CompileOptions::device)
  int depth = 16;   // decode steps in flight (the device runs up to this far ahead of the host)
  Profile profile;  // tunables for the model's steps (profiles/cpu.json, from `iron tune`)
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0;
  int64_t generated_tokens = 0;
  double generate_seconds = 0;  // the decode steps after the first token
  std::string stop;             // "end of sequence", "token limit", "context full", "interrupted"
};

class LlamaRunner {
 public:
  /// Opens a GGUF file (weights, tokenizer and config inside), or a Hugging Face model: a
  /// directory (or its model.safetensors) with config.json and, optionally, tokenizer.json.
  /// The context is held to the model's, and the chunk (batch) to the context; a failed
  /// allocation is a value error naming what the context takes and how to ask for less.
  static std::unique_ptr<LlamaRunner> open(const std::string& path, const RunnerOptions& options = {});

  const LlamaConfig& config() const { return model_->config(); }
  /// The options it runs with (the context and chunk as held to the model's).
  const RunnerOptions& options() const { return options_; }
  /// The tokenizer; a value error when the model came without one (a safetensors model with no
  /// tokenizer.json still generates from token ids).
  const text::Tokenizer& tokenizer() const;
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  double load_seconds() const { return load_seconds_; }

  /// The prompt's token ids: as a chat turn (the model's template) or plain text; an empty
  /// plain prompt is BOS alone.
  std::vector<int32_t> prompt_ids(const std::string& prompt, bool chat) const;

  /// Generates up to `max_tokens` after `prompt`, calling `on_token` with each as it lands;
  /// stops at the end of sequence, at `max_tokens`, or when the context is full.
  /// `start`: how many positions of the cache already hold this sequence's earlier tokens (left
  /// there by earlier calls, which the caller tracks); the prompt continues after them. 0 begins
  /// anew; anything from `start` on is overwritten. `interrupt`, when it turns true (a signal
  /// handler may set it), stops the decode after the token being handed over ("interrupted").
  /// `sampling`: this generation's settings (null: the options'), passed to the graph per call,
  /// so any settings run on the versions compiled once; checked first (a value error).
  GenerateStats generate(const std::vector<int32_t>& prompt, int64_t max_tokens,
                         const std::function<void(int32_t)>& on_token, bool stop_at_end = true,
                         int64_t start = 0, const std::atomic<bool>* interrupt = nullptr,
                         const Sampling* sampling = nullptr);

  /// Up to options().model.slots sequences in cache slots of their own, stepped together in one
  /// call (models/batch.hpp); what `iron serve --parallel` drives. Made on first use.
  BatchDecoder& batch();

  /// A value error unless `sampling` is settings this runner's device draws from (the ranges
  /// Sampling::check checks; on Vulkan, a temperature above 0 needs top_k 1 to 256).
  void check_sampling(const Sampling& sampling) const;

  /// Bytes of weights one decode step reads (every layer's, the classifier, one embedding row).
  int64_t weight_bytes_per_token() const;
  /// Bytes of the KV caches a decode step reads when it attends to `keys` positions (keys and
  /// values of every layer, in the caches' types).
  int64_t cache_bytes_per_token(int64_t keys) const;
  /// Bytes a context takes before any call (the KV caches, the RoPE table):
  /// what open() prints, before allocating it, when it is over 1 GiB.
  static int64_t context_bytes(const LlamaConfig& config, const LlamaOptions& options);
  /// Bytes of the KV caches and the other states.
  int64_t state_bytes() const;
  /// Bytes of the arena's scratch region.
  int64_t scratch_bytes() const;

  /// The device's own clock over the prefill and decode versions' runs so far (DeviceTime: no
  /// runs counted on the CPU). Read between calls of generate().
  DeviceTime prefill_device_time();
  DeviceTime decode_device_time();

  /// Each distinct step (operator and params) of the prefill and decode versions whose operator
  /// declares tunables to try.
  std::vector<std::pair<const Declaration*, Fields>> tunable_steps();

  /// The logits (rows, vocab) after each prompt token: a prefill of every row, for scoring.
  Tensor score(const std::vector<int32_t>& prompt);
  /// The same logits as a generation's decode steps compute them: the first token prefilled,
  /// then each later one fed to a decode step in turn (the prompt's token, not the sampled
  /// one), so each row's attention reads the cache as decoding does (score's prefill reads the
  /// chunk's own keys and values instead). For checking decode against a reference.
  Tensor score_decoding(const std::vector<int32_t>& prompt);

 private:
  LlamaRunner() = default;
  /// The model's two versions (compiled at open(), then cached by the graph).
  CompiledGraph& prefill_version();
  CompiledGraph& decode_version();
  RunnerOptions options_;
  StateDict weights_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<DecoderModel> scorer_;
  std::unique_ptr<BatchDecoder> batch_;
  double load_seconds_ = 0;
};

}  // namespace iron::models
