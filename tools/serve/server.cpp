// The HTTP front of `iron serve` (server.hpp): cpp-httplib's requests handed to the API
// (api.hpp) and its answers written back, streamed ones as chunks; and the shutdown on SIGTERM.
// cpp-httplib's thread pool gives each connection a thread; a completion's thread waits on its
// stream while the engine's thread runs the model.
#include "serve/server.hpp"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include <httplib.h>

#include "iron/error.hpp"
#include "serve/api.hpp"

namespace iron::serve {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void write_response(ApiResponse&& a, httplib::Response& res) {
  res.status = a.status;
  for (const auto& [name, value] : a.headers) res.set_header(name, value);
  if (!a.stream) {
    res.set_content(std::move(a.body), a.content_type);
    return;
  }
  // A write that fails (the client left) cancels the sequence: it leaves the model at the next
  // step. The releaser runs however the response ends.
  std::shared_ptr<BodyStream> stream = std::move(a.stream);
  res.set_chunked_content_provider(
      a.content_type,
      [stream](size_t, httplib::DataSink& sink) {
        for (;;) {
          std::string part;
          const bool more = stream->next(part, 50ms);
          if (!part.empty() && !sink.write(part.data(), part.size())) return stream->cancel(), false;
          if (!more) break;
        }
        sink.done();
        return true;
      },
      [stream](bool) { stream->cancel(); });
}

void install(Api& api, httplib::Server& s) {
  // Every GET and POST to the API, which routes it (and answers 404 for a path it has not).
  auto handler = [&api](const httplib::Request& req, httplib::Response& res) {
    ApiRequest a{req.method, req.path, Headers(req.headers.begin(), req.headers.end()), req.body, {}};
    write_response(api.handle(a), res);
  };
  s.Get(".*", handler);
  s.Post(".*", handler);
  // httplib's own refusals (another method, a body over the limit, a malformed request) as
  // OpenAI's error objects. It calls this for the API's errors too, which have a body already.
  s.set_error_handler([&api](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    write_response(api.refusal(req.method, req.path, res.status), res);
  });
}

}  // namespace

void block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A client that leaves mid-write must not end the process: the write fails instead.
  signal(SIGPIPE, SIG_IGN);
}

int serve(models::LlamaRunner* runner, models::SentenceEncoder* encoder, const ServerOptions& options) {
  if (options.parallel < 1) value_error("--parallel is at least 1");
  Api api(runner, encoder, options);
  httplib::Server server;
  // A thread per connection that can be waiting on the model (every slot and queue place) and
  // a few for /health and /metrics beside them.
  const int queue = options.queue < 0 ? 4 * options.parallel : options.queue;
  const size_t threads = size_t(options.parallel + queue + 4);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(size_t(options.body_limit));
  const auto timeout = std::chrono::microseconds(int64_t(options.read_timeout * 1e6));
  server.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), timeout.count() % 1000000);
  server.set_keep_alive_timeout(2);
  install(api, server);
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) value_error("cannot listen on " + escaped(options.host, 100) + " (any port)");
  } else if (!server.bind_to_port(options.host, port)) {
    value_error("cannot listen on " + escaped(options.host, 100) + ":" + std::to_string(port) + " (in use, or not this machine's)");
  }

  // SIGTERM or SIGINT: stop taking requests, give those in flight the grace period, cancel the
  // rest, then stop the listener (its threads finish the responses being written).
  std::atomic<bool> over{false};
  std::thread signals([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    const timespec tick{0, 100'000'000};
    while (!over.load()) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig != SIGTERM && sig != SIGINT) continue;
      std::fprintf(stderr, "serve: %s: finishing %lld request(s) in flight (grace %.0f s)\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)api.open(), options.grace);
      api.drain();
      const auto deadline = Clock::now() + std::chrono::microseconds(int64_t(options.grace * 1e6));
      while ((api.in_flight() > 0 || api.open() > 0) && Clock::now() < deadline)
        std::this_thread::sleep_for(20ms);
      if (api.in_flight() > 0 || api.open() > 0) {
        std::fprintf(stderr, "serve: grace over: cancelling %lld request(s)\n", (long long)api.open());
        api.cancel_all();
        const auto last = Clock::now() + 2s;
        while (api.open() > 0 && Clock::now() < last) std::this_thread::sleep_for(20ms);
      }
      server.stop();
      // The listener returns once its threads are done; one still reading a request a client
      // trickles would hold it for the read timeout. The answers are all written by now.
      const auto stopped_by = Clock::now() + 3s;
      while (!over.load() && Clock::now() < stopped_by) std::this_thread::sleep_for(20ms);
      if (!over.load()) {
        std::fprintf(stderr, "serve: stopped (leaving connections that are still sending a request)\n");
        std::fflush(stderr);
        std::_Exit(0);
      }
      return;
    }
  });
  std::fprintf(stderr, "listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stderr);
  const bool listened = server.listen_after_bind();
  over.store(true);
  signals.join();
  if (!listened) value_error("the listener on " + escaped(options.host, 100) + ":" + std::to_string(port) + " failed");
  std::fprintf(stderr, "serve: stopped\n");
  return 0;
}

}  // namespace iron::serve
