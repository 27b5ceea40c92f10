// The options every model command shares (-m, -t, --device, --precision, --profile, the cache
// types), declared once.
#include <filesystem>
#include <tuple>

#include "commands.hpp"
#include "iron/io/files.hpp"

namespace iron::tools {

void add_model_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("-m,--model", o.model,
                 "The model: a GGUF file, or a Hugging Face directory (config.json, model.safetensors, "
                 "tokenizer.json)")
      ->required();
  add_integer(cmd, "-t,--threads", o.threads, 0, 256, "Threads to use (0: every core)");
  cmd.add_option("--device", o.device,
                 "Where the model runs: cpu, or vulkan (the GPU IRON_VULKAN_DEVICE names, else a discrete "
                 "GPU, else an integrated one, else Mesa's lavapipe; `iron info --devices` lists them)")
      ->check(CLI::IsMember({"cpu", "vulkan"}))
      ->capture_default_str();
  cmd.add_option("--precision", o.precision,
                 "How matmuls may round: highest (f32 sums rounded once), high, or medium (activations "
                 "rounded to int8 blocks for block-quantised weights on x86 with AVX2 or VNNI, as llama.cpp does)")
      ->check(CLI::IsMember({"highest", "high", "medium"}))
      ->capture_default_str();
  cmd.add_option("--profile", o.profile,
                 "Tunables: a profile file, or a directory holding cpu.json (written by `iron tune`); "
                 "absent: the defaults")
      ->capture_default_str();
  for (auto [flags, value, what] : {std::tuple{"--cache-type-k", &o.cache_type_k, "keys"},
                                    std::tuple{"--cache-type-v", &o.cache_type_v, "values"}})
    cmd.add_option(flags, *value,
                   std::string("The KV cache's type for ") + what +
                       ": f32, f16, bf16 or q8_0 (" + (what[0] == 'k' ? "-ctk" : "-ctv") +
                       ", as llama.cpp; default: f32 at highest and high, " +
                       std::string(name(models::kMediumCacheDtype)) + " at medium, on every device)")
        ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
}

void add_generation_options(CLI::App& cmd, GenerationOptions& o) {
  add_integer(cmd, "-n,--n-predict", o.tokens, -1, kMaxRows,
              "How many tokens to generate at most (-1: until the end of sequence or a full context)");
  add_number(cmd, "--temp", o.sampling.temperature, 0, 1e6, false, "Sampling temperature; 0 is greedy");
  add_integer(cmd, "--top-k", o.sampling.top_k, 0, INT32_MAX, "Sample from the k most likely tokens (0: all)");
  add_number(cmd, "--top-p", o.sampling.top_p, 0, 1, true, "Sample from the smallest set of tokens whose probability reaches p");
  add_unsigned(cmd, "-s,--seed", o.sampling.seed,
               "Random seed for sampling, any 64-bit value (the same seed gives the same output)");
  add_integer(cmd, "-c,--ctx-size", o.context, 1, kMaxRows, "Context length: KV-cache rows (at most the model's)");
  add_integer(cmd, "-b,--batch-size", o.chunk, 1, INT32_MAX,
              "Prompt tokens a prefill call takes (held to the context, as llama.cpp does)");
}

void apply(const GenerationOptions& g, models::RunnerOptions& options) {
  options.model.context = g.context;
  options.model.chunk = g.chunk;
  options.model.sampling = g.sampling;
}

models::RunnerOptions runner_options(const ModelOptions& o) {
  namespace fs = std::filesystem;
  models::RunnerOptions options;
  options.threads = o.threads;
  options.device = o.device;
  options.model.precision = precision_from_name(o.precision);
  if (!o.cache_type_k.empty()) options.model.k_cache_dtype = dtype_from_name(o.cache_type_k);
  if (!o.cache_type_v.empty()) options.model.v_cache_dtype = dtype_from_name(o.cache_type_v);
  // A directory holds cpu.json; a file is the profile. Profile::load refuses a FIFO or a device
  // before opening it and caps the size.
  std::string file = o.profile;
  std::error_code ec;  // a path that cannot be looked up is a file: Profile::load says why
  if (fs::is_directory(o.profile, ec)) file = (fs::path(o.profile) / "cpu.json").string();
  if (fs::exists(fs::symlink_status(file, ec)) || fs::exists(file, ec))
    options.profile = Profile::load(file);
  return options;
}

}  // namespace iron::tools
