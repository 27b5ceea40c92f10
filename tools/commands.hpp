// The `iron` subcommands: each file registers one on the app; main.cpp dispatches and reports
// errors.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "iron/models/runner.hpp"

namespace iron::tools {

/// What every model command takes: the model, threads, precision and profile.
struct ModelOptions {
  std::string model;
  int threads = 0;
  std::string precision = "highest";
  std::string profile = "profiles";
};
/// Declares -m, -t, --precision and --profile on `cmd`.
void add_model_options(CLI::App& cmd, ModelOptions& options);
/// The runner options they give (the profile loaded when present).
models::RunnerOptions runner_options(const ModelOptions& options);

/// `iron info MODEL`: describes a GGUF or safetensors checkpoint.
void add_info_command(CLI::App& app);
/// `iron generate -m MODEL -p PROMPT ...`: generates text with a Llama-family model.
void add_generate_command(CLI::App& app);
/// `iron bench -m MODEL ...`: prefill and decode speed, bandwidth bound, peak memory.
void add_bench_command(CLI::App& app);
/// `iron tune -m MODEL`: writes profiles/cpu.json with the fastest tunables for the model.
void add_tune_command(CLI::App& app);

}  // namespace iron::tools
