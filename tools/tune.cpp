// `iron tune -m MODEL [-t THREADS] [--device cpu|vulkan] [-o FILE]`: tries each tunable of each distinct step the model
// runs (prefill chunk and decode step) on this device, keeps the fastest value, and writes the
// profile (profiles/cpu.json by default) that `iron generate` and `iron bench` then load.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "iron/error.hpp"
#include "iron/io/files.hpp"
#include "iron/models/runner.hpp"

namespace iron::tools {

namespace {
// Seconds for one prefill chunk and `steps` decode steps: what a user waits for.
double measure(models::LlamaRunner& runner, int64_t chunk, int64_t steps, int reps) {
  std::vector<int32_t> prompt(static_cast<size_t>(chunk));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(1 + (i * 7919) % size_t(runner.config().vocab - 1));
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto s = runner.generate(prompt, steps + 1, [](int32_t) {}, false);
    best = std::min(best, s.prompt_seconds + s.generate_seconds);
  }
  return best;
}

}  // namespace

void add_tune_command(CLI::App& app, bool execute) {
  struct Options {
    std::string model, output = "profiles/cpu.json", device = "cpu";
    int threads = 0, reps = 3;
    int64_t chunk = 64, steps = 16;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Try each operator tunable on this device for the shapes a Llama-family model runs, keep the "
      "fastest, and write the profile (one entry a line) that generate and bench load");
  cmd->add_option("-m,--model", o->model, "The model: a GGUF file, or a Hugging Face directory (config.json, model.safetensors, tokenizer.json)")->required();
  cmd->add_option("-o,--output", o->output, "Where to write the profile")->capture_default_str();
  add_integer(*cmd, "-t,--threads", o->threads, 0, 256, "Threads to use (0: every core)");
  cmd->add_option("--device", o->device, "The device to tune for: cpu, or vulkan (whose kernels have no tunables yet)")
      ->check(CLI::IsMember({"cpu", "vulkan"}))
      ->capture_default_str();
  add_integer(*cmd, "-b,--batch-size", o->chunk, 1, kMaxRows / 2, "Prompt rows a prefill call takes");
  add_integer(*cmd, "-n,--n-gen", o->steps, 0, kMaxRows / 2, "Decode steps timed per trial");
  add_integer(*cmd, "-r,--repetitions", o->reps, 1, 1000, "Timed runs per trial (the best counts)");
  // The callback holds the options: a parse without `execute` (the fuzz target) keeps them too.
  cmd->callback([o, execute] {
    if (!execute) return;
    if (o->device != "cpu") {
      // Its shaders take no profile yet: a trial of each CPU tunable there would time noise.
      std::printf("the %s device's kernels have no tunables yet: nothing to tune, no profile written\n",
                  o->device.c_str());
      return;
    }
    models::RunnerOptions options;
    options.threads = o->threads;
    options.model.chunk = o->chunk;
    options.model.context = o->chunk + o->steps + 8;
    auto base = models::LlamaRunner::open(o->model, options);
    auto steps = base->tunable_steps();
    double best_time = measure(*base, o->chunk, o->steps, o->reps);
    std::printf("%zu distinct tunable steps; untuned: %.2f ms per trial\n", steps.size(), best_time * 1e3);
    Profile profile;
    for (const auto& [decl, params] : steps) {
      for (const FieldDecl& t : decl->tunables) {
        if (t.candidates.empty()) continue;
        FieldValue best_value = *t.default_value;
        for (const FieldValue& value : t.candidates) {
          Profile trial = profile;
          Fields fields = params;
          fields.set(t.name, value);
          trial.add(decl->name, fields);
          options.profile = trial;
          auto runner = models::LlamaRunner::open(o->model, options);
          double seconds = measure(*runner, o->chunk, o->steps, o->reps);
          std::printf("  %s %s %s=%s: %.2f ms\n", decl->name.c_str(), params.str().c_str(), t.name.c_str(),
                      to_string(value).c_str(), seconds * 1e3);
          if (seconds < best_time) best_time = seconds, best_value = value;
        }
        Fields chosen = params;
        chosen.set(t.name, best_value);
        profile.add(decl->name, chosen);
      }
    }
    std::filesystem::path out(o->output);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    profile.save(o->output);
    std::printf("tuned: %.2f ms per trial; wrote %zu entries to %s\n", best_time * 1e3, profile.entries().size(),
                o->output.c_str());
  });
}

}  // namespace iron::tools
