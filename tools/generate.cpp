// `iron generate -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S] [-t THREADS]
//  [-c CONTEXT] [--chat] [--ids]`: streams text as it is produced, then the timing lines.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "iron/cpu.hpp"
#include "iron/models/engine.hpp"

namespace iron::tools {

void add_generate_command(CLI::App& app, bool execute) {
  struct Options {
    ModelOptions common;
    std::string prompt;
    GenerationOptions generation;
    bool chat = false, ids = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text with a Llama-family GGUF model: the prompt runs in chunks, then each token is "
      "sampled on the device and streamed as it is produced. Flags follow llama.cpp's names.");
  add_model_options(*cmd, o->common);
  cmd->add_option("-p,--prompt", o->prompt, "The prompt (empty: start from BOS alone)");
  add_generation_options(*cmd, o->generation);
  cmd->add_flag("--chat", o->chat, "Wrap the prompt as one user turn in the model's chat template");
  cmd->add_flag("--ids", o->ids, "Print the generated token ids instead of text");
  // The callback holds the options: a parse without `execute` (the fuzz target) keeps them too.
  cmd->callback([o, execute] {
    if (!execute) return;
    models::RunnerOptions options = runner_options(o->common);
    apply(o->generation, options);
    auto runner = models::LlamaRunner::open(o->common.model, options);
    // One sequence through the engine: the runner's chained decode loop, its text decoded there.
    models::Engine engine(*runner);
    models::Request request;
    // --chat falls back to ChatML (with a warning) for a template not rendered here: generate's
    // own choice, so its ids are made here.
    request.prompt = runner->prompt_ids(o->prompt, o->chat);
    request.sampling = options.model.sampling;
    if (o->generation.tokens >= 0) request.max_tokens = o->generation.tokens;
    const std::shared_ptr<models::Stream> stream = engine.submit(std::move(request));
    // A plain completion shows its prompt first, as llama.cpp does; a chat shows only the answer.
    if (!o->chat && !o->ids) std::fwrite(o->prompt.data(), 1, o->prompt.size(), stdout);
    bool first = true;
    for (bool more = true; more;) {
      std::string text;
      std::vector<int32_t> ids;
      more = stream->take(text, &ids, std::chrono::seconds(1));
      if (o->ids) {
        for (int32_t id : ids) {
          std::printf(first ? "%d" : " %d", id);
          first = false;
        }
      } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
      }
      std::fflush(stdout);
    }
    if (stream->failure()) std::rethrow_exception(stream->failure());
    const models::GenerateStats stats = stream->stats();
    std::printf("\n");
    std::fprintf(stderr, "\nprompt: %lld tokens in %.3f s (%.1f tokens/s)\n", (long long)stats.prompt_tokens,
                 stats.prompt_seconds, stats.prompt_tokens / std::max(stats.prompt_seconds, 1e-9));
    int64_t decoded = std::max<int64_t>(stats.generated_tokens - 1, 0);
    std::fprintf(stderr, "generated: %lld tokens; %lld decode steps in %.3f s (%.1f tokens/s); stopped: %s\n",
                 (long long)stats.generated_tokens, (long long)decoded, stats.generate_seconds,
                 decoded / std::max(stats.generate_seconds, 1e-9), stats.stop.c_str());
    std::fprintf(stderr, "load: %.3f s\n", runner->load_seconds());
    // -t is a maximum (default: the CPUs this process may run on); while other processes hold
    // cores, runs take fewer threads, with the same results.
    const int most = o->common.threads > 0 ? o->common.threads : cpu_device::available_cpus();
    std::fprintf(stderr, "threads: at most %d (%d CPUs available to this process); the last step ran on %d\n", most,
                 cpu_device::available_cpus(), cpu_device::threads_now(most));
  });
}

}  // namespace iron::tools
