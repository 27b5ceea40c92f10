// `iron serve -m MODEL [--host H] [--port P] [--parallel N] [-c CTX] [--api-key KEY] ...`: an
// OpenAI-compatible HTTP server (tools/serve/). The options are declared here; the server itself
// lives in tools/serve/ as a library of its own (it needs cpp-httplib; the fuzz target over its
// request parser links it without the rest of the command line).
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "serve/server.hpp"

namespace iron::tools {

void add_serve_command(CLI::App& app, bool execute) {
  struct Options {
    ModelOptions common;
    serve::ServerOptions server;
    int64_t context = 4096, chunk = 64;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve the model over HTTP with OpenAI's API: POST /v1/chat/completions and /v1/completions "
      "(whole or streamed as server-sent events) for a decoder, POST /v1/embeddings for a sentence encoder "
      "(a BERT-family directory such as all-MiniLM-L6-v2), GET /v1/models, /health and /metrics (Prometheus). "
      "Stops on SIGTERM or SIGINT after the requests in flight finish (or the grace period ends).");
  add_model_options(*cmd, o->common);
  cmd->add_option("--host", o->server.host, "The address to listen on (loopback unless told otherwise)")
      ->capture_default_str();
  add_integer(*cmd, "--port", o->server.port, 0, 65535, "The port (0: any free one, printed when listening)")
      ->capture_default_str();
  add_integer(*cmd, "--parallel", o->server.parallel, 1, 256,
              "Sequences decoding together, each in a KV-cache slot of its own; the queue holds 4x as many more")
      ->capture_default_str();
  add_integer(*cmd, "--queue", o->server.queue, -1, 1 << 16,
              "Requests that may wait beyond --parallel before the server answers 503 (-1: 4 x --parallel)")
      ->capture_default_str();
  add_integer(*cmd, "-c,--ctx-size", o->context, 1, kMaxRows,
              "Context length: KV-cache rows (at most the model's); a longer prompt is refused (400)")
      ->capture_default_str();
  add_integer(*cmd, "-b,--batch-size", o->chunk, 1, INT32_MAX, "Prompt tokens a prefill call takes")
      ->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on every request but GET /health (401 otherwise)");
  add_integer(*cmd, "--body-limit", o->server.body_limit, 1, int64_t(1) << 30,
              "The largest request body in bytes (413 beyond it)")
      ->capture_default_str();
  add_number(*cmd, "--read-timeout", o->server.read_timeout, 0, 3600, true,
             "Seconds a read of a request may wait for its bytes before the connection is dropped")
      ->capture_default_str();
  add_number(*cmd, "--grace", o->server.grace, 0, 3600, false,
             "Seconds the requests in flight get after SIGTERM before they are cancelled")
      ->capture_default_str();
  cmd->callback([o, execute] {
    if (!execute) return;
    // Before any thread starts (the model's pool included), so that the signals reach only the
    // thread serve() waits for them on.
    serve::block_shutdown_signals();
    serve::ServerOptions server = o->server;
    server.model_name = std::filesystem::path(o->common.model).filename().string();
    if (models::is_sentence_encoder(o->common.model)) {
      // An encoder: POST /v1/embeddings (its sentences cut at max_seq_length, not -c).
      models::EncoderOptions options;
      options.precision = precision_from_name(o->common.precision);
      options.threads = o->common.threads;
      options.device = o->common.device;
      auto encoder = models::SentenceEncoder::open(o->common.model, options);
      serve::serve(nullptr, encoder.get(), server);
      return;
    }
    models::RunnerOptions options = runner_options(o->common);
    options.model.context = o->context;
    options.model.chunk = o->chunk;
    // A cache slot per sequence decoding at once.
    options.model.slots = o->server.parallel;
    auto runner = models::LlamaRunner::open(o->common.model, options);
    serve::serve(runner.get(), nullptr, server);
  });
}

}  // namespace iron::tools
