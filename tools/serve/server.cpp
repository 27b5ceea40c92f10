// The HTTP front of `iron serve` (server.hpp): routes, the API-key check, OpenAI's response and
// event shapes, /metrics, and the shutdown on SIGTERM. cpp-httplib's thread pool gives each
// connection a thread; a completion's thread waits on its models::Stream while the engine's
// thread runs the model (models::Engine: the batching, the text and its stop strings). With a sentence encoder loaded instead of a decoder, POST /v1/embeddings
// answers (each request's texts as one batched call, calls one at a time) and the completion
// routes say what this server is.
#include "serve/server.hpp"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "iron/log.hpp"
#include "iron/models/encoder.hpp"
#include "iron/models/engine.hpp"
#include "serve/embeddings.hpp"
#include "serve/request.hpp"

namespace iron::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.json(), "application/json");
}

class Api {
 public:
  Api(models::LlamaRunner* runner, models::SentenceEncoder* encoder, const ServerOptions& o)
      : runner_(runner), encoder_(encoder), options_(o), created_(std::time(nullptr)) {
    if (runner_) engine_ = std::make_unique<models::Engine>(*runner_, o.parallel, o.queue);
  }

  void install(httplib::Server& s);
  /// Stops taking completions (503), as after SIGTERM.
  void drain() { draining_.store(true); }
  /// Completions whose response is not yet written to the end.
  int64_t open() const { return open_.load(); }
  /// Sequences queued or decoding (none with an encoder, whose requests are all open()).
  int64_t in_flight() const { return engine_ ? engine_->in_flight() : 0; }
  void cancel_all() {
    if (engine_) engine_->cancel_all();
  }

 private:
  bool authorised(const httplib::Request& req, httplib::Response& res) const;
  void complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void embed(const httplib::Request& req, httplib::Response& res);
  /// False (after answering 503) once the server is shutting down.
  bool taking(httplib::Response& res) const;
  std::string metrics() const;
  void count(const std::string& path, int status);

  models::LlamaRunner* runner_;        // a decoder: completions
  models::SentenceEncoder* encoder_;   // or an encoder: embeddings
  ServerOptions options_;
  std::unique_ptr<models::Engine> engine_;  // with a decoder
  std::mutex encoder_mutex_;              // one embeddings call at a time
  std::atomic<int64_t> embedded_{0}, embedded_tokens_{0};
  std::time_t created_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> open_{0}, next_id_{0};
  mutable std::mutex count_mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (path, status) -> count
  std::mt19937_64 seeds_{std::random_device{}()};
  std::mutex seed_mutex_;
};

// Keys compared in time that does not depend on where they differ.
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void Api::count(const std::string& path, int status) {
  static const char* const kPaths[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models",
                                       "/health", "/metrics"};
  std::string known = "other";
  for (const char* p : kPaths)
    if (path == p) known = p;
  std::lock_guard lock(count_mutex_);
  ++requests_[{known, status}];
}

// The API key, when asked for, on every route but /health. Checked in the handlers, after the
// body is read: a refusal that left the body unread would leave it to be parsed as the next
// request on a kept-alive connection.
bool Api::authorised(const httplib::Request& req, httplib::Response& res) const {
  if (options_.api_key.empty()) return true;
  const std::string given = req.get_header_value("Authorization");
  if (same_key(given, "Bearer " + options_.api_key)) return true;
  answer_error(res, ApiError(401, "invalid_request_error",
                             given.empty() ? "this server needs an API key: send 'Authorization: Bearer KEY'"
                                           : "the API key is not this server's",
                             {}, "invalid_api_key"));
  return false;
}

void Api::install(httplib::Server& s) {
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_content(R"({"status":"shutting down"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorised(req, res)) return;
    const int64_t context = runner_ ? runner_->options().model.context : encoder_->sentence_config().max_seq_length;
    json model{{"id", options_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "iron"},
               {"context_length", context}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorised(req, res)) return;
    res.set_content(metrics(), "text/plain; version=0.0.4");
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, Endpoint::chat);
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    complete(req, res, Endpoint::completion);
  });
  s.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) { embed(req, res); });
  // httplib's own refusals (no route, a body over the limit, a malformed request) as OpenAI's
  // error objects.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string type = "invalid_request_error", message;
    switch (res.status) {
      case 404: message = "no route " + req.method + " " + escaped(req.path, 100); type = "not_found_error"; break;
      case 413: message = "the request body is over this server's limit (--body-limit)"; break;
      case 408: message = "the request took too long to arrive (--read-timeout)"; break;
      default: message = std::string("the request was refused with status ") + std::to_string(res.status);
    }
    answer_error(res, ApiError(res.status, type, message));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      answer_error(res, e);
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("serve: ") + e.what());
      answer_error(res, ApiError(500, "server_error", e.what()));
    } catch (...) {
      answer_error(res, ApiError(500, "server_error", "unknown failure"));
    }
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) { count(req.path, res.status); });
}

bool Api::taking(httplib::Response& res) const {
  if (!draining_) return true;
  res.set_header("Retry-After", "1");
  answer_error(res, ApiError(503, "server_error", "the server is shutting down"));
  return false;
}

void log_ignored(const std::string& path, const std::vector<std::string>& ignored) {
  if (ignored.empty()) return;
  std::string names;
  for (const std::string& n : ignored) names += (names.empty() ? "'" : ", '") + escaped(n, 60) + "'";
  log(LogLevel::warning, "serve: " + path + ": ignoring unknown field(s) " + names);
}

void Api::embed(const httplib::Request& req, httplib::Response& res) {
  if (!authorised(req, res) || !taking(res)) return;
  if (!encoder_) {
    answer_error(res, ApiError(400, "invalid_request_error",
                               "this server's model is a decoder (a language model): embeddings need a sentence "
                               "encoder (iron serve -m a BERT-family directory such as all-MiniLM-L6-v2, or "
                               "EmbeddingGemma's)",
                               {}, "model_not_an_encoder"));
    return;
  }
  EmbeddingRequest r;
  try {
    r = parse_embedding_request(req.body);
  } catch (const ApiError& e) {
    answer_error(res, e);
    return;
  }
  log_ignored(req.path, r.ignored);
  ++open_;
  std::vector<std::vector<float>> vectors;
  int64_t tokens = 0;
  std::string prompt;
  try {
    if (r.dimensions > encoder_->dim())
      throw ApiError(400, "invalid_request_error",
                     "'dimensions' " + std::to_string(r.dimensions) + " is more than the model's " +
                         std::to_string(encoder_->dim()),
                     "dimensions");
    prompt = encoder_->prompt(r.prompt_name);
  } catch (const ApiError& e) {
    --open_;
    answer_error(res, e);
    return;
  } catch (const Error& e) {  // an unknown prompt name: the message lists the model's
    --open_;
    answer_error(res, ApiError(400, "invalid_request_error", e.what(), "prompt_name"));
    return;
  }
  try {
    std::vector<std::vector<int32_t>> ids;
    ids.reserve(r.inputs.size());
    for (const std::string& text : r.inputs) {
      ids.push_back(encoder_->ids(text, prompt));
      tokens += int64_t(ids.back().size());
    }
    std::lock_guard lock(encoder_mutex_);
    vectors = encoder_->embed_ids(ids);
    if (r.dimensions > 0) models::truncate_dimensions(vectors, r.dimensions, encoder_->normalizes());
  } catch (const std::exception& e) {
    --open_;
    answer_error(res, ApiError(500, "server_error", std::string("the model failed: ") + e.what()));
    return;
  }
  embedded_ += int64_t(vectors.size());
  embedded_tokens_ += tokens;
  --open_;
  res.set_content(embeddings_json(vectors, r.model.empty() ? options_.model_name : r.model, tokens, r.base64),
                  "application/json");
}

void Api::complete(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  if (!authorised(req, res) || !taking(res)) return;
  if (!runner_) {
    answer_error(res, ApiError(400, "invalid_request_error",
                               "this server's model is a sentence encoder: it answers POST /v1/embeddings, not "
                               "completions",
                               {}, "model_not_a_decoder"));
    return;
  }
  CompletionRequest r;
  try {
    r = parse_request(req.body, endpoint);
  } catch (const ApiError& e) {
    answer_error(res, e);
    return;
  }
  log_ignored(req.path, r.ignored);
  const bool chat = endpoint == Endpoint::chat;
  models::Request q;
  if (chat) q.prompt = std::move(r.messages);
  else q.prompt = std::move(r.prompt);
  if (!r.seeded) {
    std::lock_guard lock(seed_mutex_);
    r.sampling.seed = seeds_();
  }
  q.sampling = r.sampling;
  q.max_tokens = r.max_tokens;
  q.stop = r.stop;
  q.stop_at_end = !r.ignore_eos;
  std::shared_ptr<models::Stream> seq;
  try {
    seq = engine_->submit(std::move(q));
  } catch (const models::RequestError& e) {
    std::string message = e.what();
    if (e.code() == "unsupported_chat_template") message += " (send the text to /v1/completions instead)";
    // The parser held every setting to its range: what the engine refuses of the sampling is what
    // the device cannot draw (Vulkan: top_k 1 to 256 at a temperature).
    const std::string param = e.field() == "sampling" ? "top_k" : e.field();
    answer_error(res, ApiError(400, "invalid_request_error", message, param, e.code()));
    return;
  }
  if (!seq) {
    res.set_header("Retry-After", "1");
    answer_error(res, ApiError(503, "server_error", "the server is busy: every slot and queue place is taken"));
    return;
  }
  const int64_t prompt_tokens = seq->prompt_tokens();
  const std::string id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  const std::string object = chat ? "chat.completion" : "text_completion";
  const std::string model = r.model.empty() ? options_.model_name : r.model;
  const std::time_t created = std::time(nullptr);
  // Every token counts, the end token and those past a stop string too.
  auto usage = [prompt_tokens](const std::vector<int32_t>& ids) {
    const int64_t completion = int64_t(ids.size());
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion}};
  };
  // A sequence cancelled here (the shutdown's grace over) is cut for length, as OpenAI has no
  // finish for it.
  auto finish_reason = [](const models::Stream& s) { return s.finish() == "cancelled" ? "length" : s.finish(); };
  ++open_;
  if (!r.stream) {
    std::string text;
    std::vector<int32_t> ids;
    while (seq->take(text, &ids, 1000ms)) {
    }
    --open_;
    if (!seq->error().empty()) {
      answer_error(res, ApiError(500, "server_error", "the model failed: " + seq->error()));
      return;
    }
    const std::string finish = finish_reason(*seq);
    json choice{{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    if (r.return_tokens) choice["tokens"] = ids;
    json body{{"id", id}, {"object", object}, {"created", created}, {"model", model},
              {"choices", json::array({choice})}, {"usage", usage(ids)}};
    res.set_content(dump(body), "application/json");
    return;
  }
  // Streamed: one event per piece of text, then the finish, the usage if asked, and [DONE]. A
  // write that fails (the client left) cancels the sequence: it leaves the model at the next
  // step. The releaser runs however the response ends.
  res.set_header("Cache-Control", "no-cache");
  const bool include_usage = r.include_usage, return_tokens = r.return_tokens;
  res.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink& sink) {
        const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
        auto event = [&](const json& choice, const json* usage_value) {
          json body{{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model},
                    {"choices", choice.is_null() ? json::array() : json::array({choice})}};
          if (usage_value) body["usage"] = *usage_value;
          const std::string line = "data: " + dump(body) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        auto piece = [&](const std::string& text, const json& finish, bool first) {
          json choice{{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
          if (chat) {
            json delta = json::object();
            if (first) delta["role"] = "assistant";
            if (!text.empty() || first) delta["content"] = text;
            choice["delta"] = delta;
          } else {
            choice["text"] = text;
          }
          return choice;
        };
        bool first = true;
        auto last_write = Clock::now();
        std::vector<int32_t> ids;
        size_t sent_ids = 0;
        auto unsent_ids = [&] {
          std::vector<int32_t> unsent(ids.begin() + long(sent_ids), ids.end());
          sent_ids = ids.size();
          return unsent;
        };
        for (;;) {
          std::string text;
          const bool more = seq->take(text, &ids, 50ms);
          if (!text.empty() || (first && chat)) {
            json choice = piece(text, nullptr, first);
            if (return_tokens) choice["tokens"] = unsent_ids();
            if (!event(choice, nullptr)) return seq->cancel(), false;
            first = false;
            last_write = Clock::now();
          } else if (more && Clock::now() - last_write > 200ms) {
            // Nothing to say (text held back, a long prefill): a comment, so that a client who
            // left is noticed.
            if (!sink.write(": waiting\n\n", 11)) return seq->cancel(), false;
            last_write = Clock::now();
          }
          if (!more) break;
        }
        if (!seq->error().empty()) {
          const std::string line =
              "data: " + ApiError(500, "server_error", "the model failed: " + seq->error()).json() + "\n\n";
          sink.write(line.data(), line.size());
        } else {
          json choice = piece("", finish_reason(*seq), false);
          if (chat) choice["delta"] = json::object();
          if (return_tokens) choice["tokens"] = unsent_ids();
          if (!event(choice, nullptr)) return seq->cancel(), false;
          if (include_usage) {
            const json u = usage(ids);
            if (!event(json(), &u)) return false;
          }
        }
        sink.write("data: [DONE]\n\n", 14);
        sink.done();
        return true;
      },
      [this, seq](bool) {
        seq->cancel();
        --open_;
      });
}

std::string Api::metrics() const {
  const models::EngineStats s = engine_ ? engine_->stats() : models::EngineStats{};
  std::ostringstream out;
  out << "# HELP iron_requests_total HTTP requests answered, by path and status.\n"
         "# TYPE iron_requests_total counter\n";
  {
    std::lock_guard lock(count_mutex_);
    for (const auto& [key, n] : requests_)
      out << "iron_requests_total{path=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  }
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
  };
  metric("iron_prompt_tokens_total", "counter", "Prompt tokens taken in.", s.prompt_tokens);
  metric("iron_completion_tokens_total", "counter", "Tokens generated.", s.completion_tokens);
  metric("iron_sequences_total", "counter", "Sequences finished (any way).", s.sequences);
  metric("iron_queue_depth", "gauge", "Requests waiting for a slot.", s.queued);
  metric("iron_active_sequences", "gauge", "Sequences decoding.", s.active);
  metric("iron_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.", s.tokens_per_second);
  metric("iron_embeddings_total", "counter", "Texts embedded.", embedded_.load());
  metric("iron_embedding_tokens_total", "counter", "Tokens of the texts embedded.", embedded_tokens_.load());
  return out.str();
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
  if (!runner == !encoder) value_error("serve: one model, a decoder or a sentence encoder");
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
  api.install(server);
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
