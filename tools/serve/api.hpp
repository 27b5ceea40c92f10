// `iron serve`'s OpenAI API without its transport: a request (method, path, headers, body) in, a
// response out, whole or as a stream of server-sent events. The HTTP server (server.cpp, on
// cpp-httplib) and Python's iron.Api (what a Ray Serve replica answers with, python/iron/ray/)
// both answer through it, so the routes, the API key, the checks, the error objects, the response
// and event shapes and the counters of /metrics are one code. It needs no HTTP library.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iron/models/encoder.hpp"
#include "iron/models/engine.hpp"
#include "iron/models/runner.hpp"

namespace iron::serve {

/// What the API itself is told (the HTTP server adds its own: ServerOptions).
struct ApiOptions {
  int parallel = 1;          // sequences at once
  int queue = -1;            // requests waiting beyond them; -1: 4 x parallel
  std::string api_key;       // empty: none asked for
  std::string model_name;    // what /v1/models lists and answers name when a request names none
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct ApiRequest {
  std::string method;  // "GET", "POST", ... ("HEAD" is answered as "GET")
  std::string path;    // "/v1/chat/completions" (no query)
  Headers headers;     // names in any case
  std::string body;
  /// Called on the engine's thread whenever a streamed answer has news: a wake-up for a reader
  /// that waits elsewhere than in BodyStream::next (an event loop). Quick; it must not call the Api.
  std::function<void()> on_news;
  /// The first header of that name (compared without case), or "".
  std::string header(std::string_view name) const;
};

/// A streamed answer's body: server-sent events, each whole.
class BodyStream {
 public:
  /// Cancels the sequence if it is not over.
  virtual ~BodyStream() = default;
  /// Waits up to `wait` for news and appends what is ready to `out` (whole events, or a comment
  /// ": waiting" after 200 ms of nothing, so that a writer notices a client who left). Returns
  /// false once the body is all given (the last events, "data: [DONE]", in `out`).
  virtual bool next(std::string& out, std::chrono::milliseconds wait) = 0;
  /// The reader is gone: the sequence leaves the model at the next step.
  virtual void cancel() = 0;
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;                     // beyond the content type (Retry-After, Cache-Control)
  std::string body;                    // a whole answer
  std::shared_ptr<BodyStream> stream;  // or a streamed one ("text/event-stream"; body empty)
};

class Api {
 public:
  /// Over a decoder (`runner`: completions, through a models::Engine of options.parallel slots)
  /// or a sentence encoder (`encoder`: embeddings); the other is null. Both outlive the Api.
  Api(models::LlamaRunner* runner, models::SentenceEncoder* encoder, const ApiOptions& options);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  /// Answers one request, counted for /metrics; never throws (a failure is a 500 error object).
  /// Returns when the answer is whole: a completion's at its end, an embeddings call's after it;
  /// a streamed completion's once it is queued, the rest read from its stream (which must not
  /// outlive the Api).
  ApiResponse handle(const ApiRequest& request);
  /// The transport's own refusal of a request it could not read (a body over its limit, a read
  /// timed out, a malformed request): OpenAI's error object for `status`, counted.
  ApiResponse refusal(const std::string& method, const std::string& path, int status);

  /// Stops taking completions and embeddings (503), as after SIGTERM; /health answers 503 too.
  void drain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  /// Answers whose response is not yet given to the end.
  int64_t open() const { return open_->load(); }
  /// Sequences queued or decoding (none with an encoder, whose requests are all open()).
  int64_t in_flight() const { return engine_ ? engine_->in_flight() : 0; }
  void cancel_all() {
    if (engine_) engine_->cancel_all();
  }

 private:
  bool authorised(const ApiRequest& req, ApiResponse& res) const;
  bool taking(ApiResponse& res) const;
  ApiResponse route(const ApiRequest& req);
  ApiResponse complete(const ApiRequest& req, bool chat);
  ApiResponse embed(const ApiRequest& req);
  ApiResponse models() const;
  std::string metrics() const;
  void count(const std::string& path, int status);

  models::LlamaRunner* runner_;        // a decoder: completions
  models::SentenceEncoder* encoder_;   // or an encoder: embeddings
  ApiOptions options_;
  std::unique_ptr<models::Engine> engine_;  // with a decoder
  std::mutex encoder_mutex_;                // one embeddings call at a time
  std::atomic<int64_t> embedded_{0}, embedded_tokens_{0};
  std::time_t created_;
  std::atomic<bool> draining_{false};
  // Shared with the streams, which count themselves out when they end.
  std::shared_ptr<std::atomic<int64_t>> open_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<int64_t> next_id_{0};
  mutable std::mutex count_mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (path, status) -> count
  std::mt19937_64 seeds_{std::random_device{}()};
  std::mutex seed_mutex_;
};

}  // namespace iron::serve
