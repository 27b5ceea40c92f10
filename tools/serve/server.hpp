// `iron serve`: the OpenAI API (api.hpp) over HTTP (cpp-httplib).
#pragma once

#include <cstdint>
#include <string>

#include "iron/models/encoder.hpp"
#include "iron/models/runner.hpp"
#include "serve/api.hpp"

namespace iron::serve {

/// The API's options and the HTTP server's own.
struct ServerOptions : ApiOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (printed when listening)
  int64_t body_limit = 1 << 20;
  double read_timeout = 30;  // seconds a connection may take to send its request
  double grace = 10;         // seconds in-flight requests get after SIGTERM
};

/// Serves until SIGTERM or SIGINT (stops taking requests, lets the ones in flight finish for
/// `grace` seconds, cancels the rest), then returns 0. Prints "listening on http://HOST:PORT"
/// on standard error once requests are taken. SIGTERM and SIGINT must already be blocked in
/// every thread (block_shutdown_signals(), before the model's threads start).
/// The model is a decoder (`runner`: completions) or a sentence encoder (`encoder`: embeddings);
/// the other is null.
int serve(models::LlamaRunner* runner, models::SentenceEncoder* encoder, const ServerOptions& options);

/// Blocks SIGTERM and SIGINT in the calling thread and the threads it starts later: serve()
/// waits for them on a thread of its own.
void block_shutdown_signals();

}  // namespace iron::serve
