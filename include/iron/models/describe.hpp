// A human-readable account of a checkpoint file: what `iron info` prints.
#pragma once

#include <cstddef>
#include <string>

namespace iron::models {

struct DescribeOptions {
  /// A Hugging Face config.json for a safetensors file (empty: none; a GGUF file ignores it, with
  /// a note). A tokenizer.json next to it is summarised too.
  std::string config_path;
  /// How many entries of an array value to show.
  size_t array_items = 6;
  /// Longer strings are cut (at a character boundary) and end in "...".
  size_t string_chars = 64;
  /// List every tensor (otherwise only the totals).
  bool tensors = true;
};

/// Describes the GGUF or safetensors file at `path` (or a Hugging Face directory's
/// model.safetensors with its config.json, and for a sentence encoder its sentence-transformers
/// pipeline): format and version, every metadata key with
/// its type and value, the tensor table (name, dtype, row-major shape, bytes, absolute offset),
/// totals (tensors, parameters, bytes by dtype) and, for Llama-family models, the LlamaConfig
/// line and a tokenizer summary. A config or tokenizer that cannot be read is reported in the
/// text. Throws iron::Error when the file itself cannot be opened or parsed.
std::string describe_checkpoint(const std::string& path, const DescribeOptions& options = {});

}  // namespace iron::models
