// The options every model command shares (-m, -t, --precision, --profile), declared once.
#include <filesystem>

#include "commands.hpp"

namespace iron::tools {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model,
                 "The model: a GGUF file, or a Hugging Face directory (config.json, model.safetensors, "
                 "tokenizer.json)")
      ->required();
  cmd.add_option("-t,--threads", o.threads, "Threads to use (0: every core)")->capture_default_str();
  cmd.add_option("--precision", o.precision,
                 "How matmuls may round: highest (f32 sums rounded once), high, or medium (activations "
                 "rounded to int8 blocks where the CPU has VNNI, as llama.cpp does)")
      ->check(CLI::IsMember({"highest", "high", "medium"}))
      ->capture_default_str();
  cmd.add_option("--profile", o.profile,
                 "Tunables: a profile file, or a directory holding cpu.json (written by `iron tune`); "
                 "absent: the defaults")
      ->capture_default_str();
}

models::RunnerOptions runner_options(const ModelOptions& o) {
  models::RunnerOptions options;
  options.threads = o.threads;
  options.model.precision = precision_from_name(o.precision);
  if (std::filesystem::exists(o.profile)) options.profile = Profile::load_for_device(o.profile, "cpu");
  return options;
}

}  // namespace iron::tools
