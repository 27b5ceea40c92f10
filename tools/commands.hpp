// The `iron` subcommands: each file registers one on the app; command_line.cpp dispatches and
// reports errors, main.cpp runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "iron/models/runner.hpp"

namespace iron::tools {

/// Parses the command line `args` (the program's name first) and, when `execute`, runs the
/// command. Returns the exit status: 0, or 1 after one line "iron: error: ..." on `err`. With
/// `execute` false only the parse and its checks run (the fuzz target over the options).
int run_command_line(const std::vector<std::string>& args, bool execute, std::ostream& out, std::ostream& err);

/// Numeric options, checked at parse time: the whole text must be a decimal number in range
/// (CLI11 alone takes '' as 0, wraps -1 into an unsigned and accepts nan). The bounds and the
/// error name the option.
CLI::Option* add_integer(CLI::App& cmd, const std::string& flags, int64_t& value, int64_t lo, int64_t hi,
                         const std::string& help);
CLI::Option* add_integer(CLI::App& cmd, const std::string& flags, int& value, int64_t lo, int64_t hi,
                         const std::string& help);
/// Any unsigned 64-bit integer (a seed).
CLI::Option* add_unsigned(CLI::App& cmd, const std::string& flags, uint64_t& value, const std::string& help);
/// A finite number in [lo, hi] (in (lo, hi] when `lo_open`).
CLI::Option* add_number(CLI::App& cmd, const std::string& flags, double& value, double lo, double hi, bool lo_open,
                        const std::string& help);

/// The most rows a context, a prompt or a run of tokens may ask for: positions are per-call
/// values (below 2^30), and a cache holds context + batch rows.
inline constexpr int64_t kMaxRows = int64_t(1) << 29;

/// What every model command takes: the model, threads, device, precision and profile.
struct ModelOptions {
  std::string model;
  int threads = 0;
  std::string device = "cpu";
  std::string precision = "highest";
  std::string profile = "profiles";
  std::string cache_type_k, cache_type_v;  // empty: the precision's default
};
/// Declares -m, -t, --device, --precision, --profile and the cache types on `cmd`.
void add_model_options(CLI::App& cmd, ModelOptions& options);
/// The runner options they give (the profile loaded when present).
models::RunnerOptions runner_options(const ModelOptions& options);

/// What generate and chat share: how much to generate, the context and the sampling (llama.cpp's
/// defaults, Sampling's own: greedy, top_k 40, top_p 0.95, seed 0).
struct GenerationOptions {
  int64_t tokens = 128, context = 2048, chunk = 64;
  Sampling sampling;
};
/// Declares -n, --temp, --top-k, --top-p, -s, -c and -b (llama.cpp's names) on `cmd`.
void add_generation_options(CLI::App& cmd, GenerationOptions& options);
/// Sets the context, chunk and sampling of `options` from them.
void apply(const GenerationOptions& generation, models::RunnerOptions& options);

/// Each command's options, and with `execute` its run as the callback.
/// `iron info MODEL`: describes a GGUF or safetensors checkpoint.
void add_info_command(CLI::App& app, bool execute);
/// `iron generate -m MODEL -p PROMPT ...`: generates text with a Llama-family model.
void add_generate_command(CLI::App& app, bool execute);
/// `iron bench -m MODEL ...`: prefill and decode speed, bandwidth bound, peak memory.
void add_bench_command(CLI::App& app, bool execute);
/// `iron chat -m MODEL`: a conversation that keeps its cache between turns.
void add_chat_command(CLI::App& app, bool execute);
/// `iron tune -m MODEL`: writes profiles/cpu.json with the fastest tunables for the model.
void add_tune_command(CLI::App& app, bool execute);
/// `iron serve -m MODEL`: an OpenAI-compatible HTTP server (tools/serve/).
void add_serve_command(CLI::App& app, bool execute);
/// `iron embed -m MODEL -p TEXT...`: sentence embeddings with a BERT-family encoder.
void add_embed_command(CLI::App& app, bool execute);

}  // namespace iron::tools
