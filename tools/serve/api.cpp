// The OpenAI API (api.hpp): routes, the API-key check, OpenAI's response and event shapes, and
// /metrics. A completion waits on its models::Stream while the engine's thread runs the model
// (models::Engine: the batching, the text and its stop strings). With a sentence encoder loaded
// instead of a decoder, POST /v1/embeddings answers (each request's texts as one batched call,
// calls one at a time) and the completion routes say what this server is.
#include "serve/api.hpp"

#include <cctype>
#include <sstream>

#include <nlohmann/json.hpp>

#include "iron/log.hpp"
#include "serve/embeddings.hpp"
#include "serve/request.hpp"

namespace iron::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiResponse error_response(const ApiError& e) {
  ApiResponse res;
  res.status = e.status();
  res.body = e.json();
  return res;
}

// A request refused before it reaches a route: no such route, or the transport could not read it.
ApiError refused(const std::string& method, const std::string& path, int status) {
  std::string type = "invalid_request_error", message;
  switch (status) {
    case 404: message = "no route " + escaped(method, 20) + " " + escaped(path, 100); type = "not_found_error"; break;
    case 413: message = "the request body is over this server's limit (--body-limit)"; break;
    case 408: message = "the request took too long to arrive (--read-timeout)"; break;
    default: message = "the request was refused with status " + std::to_string(status);
  }
  return ApiError(status, type, message);
}

// Keys compared in time that does not depend on where they differ.
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void log_ignored(const std::string& path, const std::vector<std::string>& ignored) {
  if (ignored.empty()) return;
  std::string names;
  for (const std::string& n : ignored) names += (names.empty() ? "'" : ", '") + escaped(n, 60) + "'";
  log(LogLevel::warning, "serve: " + path + ": ignoring unknown field(s) " + names);
}

// A sequence cancelled by a shutdown past its grace is cut for length, as OpenAI has no finish
// for it.
std::string finish_reason(const models::Stream& s) { return s.finish() == "cancelled" ? "length" : s.finish(); }

// What a completion's answer says besides its text: the same for a whole answer and each event.
struct Answer {
  std::shared_ptr<models::Stream> seq;
  bool chat = false;
  std::string id, model;
  std::time_t created = 0;
  bool return_tokens = false, include_usage = false;
  // Every token counts, the end token and those past a stop string too.
  json usage(const std::vector<int32_t>& ids) const {
    const int64_t prompt = seq->prompt_tokens(), completion = int64_t(ids.size());
    return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  }
  json body(const char* object, json choices) const {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
  }
};

// A streamed completion: one event per piece of text, then the finish, the usage if asked, and
// [DONE]. Counted out of the Api's open answers when it ends, however it ends.
class CompletionStream : public BodyStream {
 public:
  CompletionStream(Answer answer, std::shared_ptr<std::atomic<int64_t>> open)
      : a_(std::move(answer)), open_(std::move(open)), last_write_(Clock::now()) {}
  ~CompletionStream() override {
    a_.seq->cancel();
    end();
  }
  void cancel() override { a_.seq->cancel(); }

  bool next(std::string& out, std::chrono::milliseconds wait) override {
    if (ended_) return false;
    std::string text;
    const bool more = a_.seq->take(text, &ids_, wait);
    if (!text.empty() || (first_ && a_.chat)) {
      json choice = piece(text, nullptr);
      if (a_.return_tokens) choice["tokens"] = unsent_ids();
      event(out, choice, nullptr);
      first_ = false;
      last_write_ = Clock::now();
    } else if (more && Clock::now() - last_write_ > 200ms) {
      // Nothing to say (text held back, a long prefill): a comment, so that a client who left
      // is noticed.
      out += ": waiting\n\n";
      last_write_ = Clock::now();
    }
    if (more) return true;
    if (!a_.seq->error().empty()) {
      out += "data: " + ApiError(500, "server_error", "the model failed: " + a_.seq->error()).json() + "\n\n";
    } else {
      json choice = piece("", finish_reason(*a_.seq));
      if (a_.chat) choice["delta"] = json::object();
      if (a_.return_tokens) choice["tokens"] = unsent_ids();
      event(out, choice, nullptr);
      if (a_.include_usage) {
        const json u = a_.usage(ids_);
        event(out, json(), &u);
      }
    }
    out += "data: [DONE]\n\n";
    end();
    return false;
  }

 private:
  void end() {
    if (!ended_) --*open_;
    ended_ = true;
  }
  void event(std::string& out, const json& choice, const json* usage) const {
    json body = a_.body(a_.chat ? "chat.completion.chunk" : "text_completion",
                        choice.is_null() ? json::array() : json::array({choice}));
    if (usage) body["usage"] = *usage;
    out += "data: " + dump(body) + "\n\n";
  }
  json piece(const std::string& text, const json& finish) const {
    json choice{{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (a_.chat) {
      json delta = json::object();
      if (first_) delta["role"] = "assistant";
      if (!text.empty() || first_) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text;
    }
    return choice;
  }
  std::vector<int32_t> unsent_ids() {
    std::vector<int32_t> unsent(ids_.begin() + long(sent_ids_), ids_.end());
    sent_ids_ = ids_.size();
    return unsent;
  }

  Answer a_;
  std::shared_ptr<std::atomic<int64_t>> open_;
  bool first_ = true, ended_ = false;
  Clock::time_point last_write_;
  std::vector<int32_t> ids_;
  size_t sent_ids_ = 0;
};

}  // namespace

std::string ApiRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < key.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(key[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (same) return value;
  }
  return {};
}

Api::Api(models::LlamaRunner* runner, models::SentenceEncoder* encoder, const ApiOptions& o)
    : runner_(runner), encoder_(encoder), options_(o), created_(std::time(nullptr)) {
  if (o.parallel < 1) value_error("serve: parallel is at least 1");
  if (!runner_ == !encoder_) value_error("serve: one model, a decoder or a sentence encoder");
  if (runner_) engine_ = std::make_unique<models::Engine>(*runner_, o.parallel, o.queue);
}

Api::~Api() = default;

void Api::count(const std::string& path, int status) {
  static const char* const kPaths[] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models",
                                       "/health", "/metrics"};
  std::string known = "other";
  for (const char* p : kPaths)
    if (path == p) known = p;
  std::lock_guard lock(count_mutex_);
  ++requests_[{known, status}];
}

ApiResponse Api::handle(const ApiRequest& req) {
  ApiResponse res;
  try {
    res = route(req);
  } catch (const ApiError& e) {
    res = error_response(e);
  } catch (const std::exception& e) {
    log(LogLevel::error, std::string("serve: ") + e.what());
    res = error_response(ApiError(500, "server_error", e.what()));
  } catch (...) {
    res = error_response(ApiError(500, "server_error", "unknown failure"));
  }
  count(req.path, res.status);
  return res;
}

ApiResponse Api::refusal(const std::string& method, const std::string& path, int status) {
  count(path, status);
  return error_response(refused(method, path, status));
}

ApiResponse Api::route(const ApiRequest& req) {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  ApiResponse res;
  if (method == "GET" && req.path == "/health") {
    // The one route without the API key: a load balancer's (or Ray's) health check.
    if (draining_) {
      res.status = 503;
      res.body = R"({"status":"shutting down"})";
    } else {
      res.body = R"({"status":"ok"})";
    }
    return res;
  }
  const bool get = method == "GET", post = method == "POST";
  const bool known = (get && (req.path == "/v1/models" || req.path == "/metrics")) ||
                     (post && (req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
                               req.path == "/v1/embeddings"));
  if (!known) return error_response(refused(req.method, req.path, 404));
  if (!authorised(req, res)) return res;
  if (req.path == "/v1/models") return models();
  if (req.path == "/metrics") {
    res.content_type = "text/plain; version=0.0.4";
    res.body = metrics();
    return res;
  }
  if (!taking(res)) return res;
  if (req.path == "/v1/embeddings") return embed(req);
  return complete(req, req.path == "/v1/chat/completions");
}

// The API key, when asked for, on every route but /health.
bool Api::authorised(const ApiRequest& req, ApiResponse& res) const {
  if (options_.api_key.empty()) return true;
  const std::string given = req.header("Authorization");
  if (same_key(given, "Bearer " + options_.api_key)) return true;
  res = error_response(ApiError(401, "invalid_request_error",
                                given.empty() ? "this server needs an API key: send 'Authorization: Bearer KEY'"
                                              : "the API key is not this server's",
                                {}, "invalid_api_key"));
  return false;
}

bool Api::taking(ApiResponse& res) const {
  if (!draining_) return true;
  res = error_response(ApiError(503, "server_error", "the server is shutting down"));
  res.headers.emplace_back("Retry-After", "1");
  return false;
}

ApiResponse Api::models() const {
  const int64_t context = runner_ ? runner_->options().model.context : encoder_->sentence_config().max_seq_length;
  json model{{"id", options_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "iron"},
             {"context_length", context}};
  ApiResponse res;
  res.body = dump({{"object", "list"}, {"data", json::array({model})}});
  return res;
}

ApiResponse Api::embed(const ApiRequest& req) {
  if (!encoder_)
    throw ApiError(400, "invalid_request_error",
                   "this server's model is a decoder (a language model): embeddings need a sentence encoder "
                   "(iron serve -m a BERT-family directory such as all-MiniLM-L6-v2, or EmbeddingGemma's)",
                   {}, "model_not_an_encoder");
  EmbeddingRequest r = parse_embedding_request(req.body);
  log_ignored(req.path, r.ignored);
  if (r.dimensions > encoder_->dim())
    throw ApiError(400, "invalid_request_error",
                   "'dimensions' " + std::to_string(r.dimensions) + " is more than the model's " +
                       std::to_string(encoder_->dim()),
                   "dimensions");
  std::string prompt;
  try {
    prompt = encoder_->prompt(r.prompt_name);
  } catch (const Error& e) {  // an unknown prompt name: the message lists the model's
    throw ApiError(400, "invalid_request_error", e.what(), "prompt_name");
  }
  ++*open_;
  struct Closing {
    std::atomic<int64_t>& open;
    ~Closing() { --open; }
  } closing{*open_};
  std::vector<std::vector<float>> vectors;
  int64_t tokens = 0;
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
    throw ApiError(500, "server_error", std::string("the model failed: ") + e.what());
  }
  embedded_ += int64_t(vectors.size());
  embedded_tokens_ += tokens;
  ApiResponse res;
  res.body = embeddings_json(vectors, r.model.empty() ? options_.model_name : r.model, tokens, r.base64);
  return res;
}

ApiResponse Api::complete(const ApiRequest& req, bool chat) {
  if (!runner_)
    throw ApiError(400, "invalid_request_error",
                   "this server's model is a sentence encoder: it answers POST /v1/embeddings, not completions", {},
                   "model_not_a_decoder");
  CompletionRequest r = parse_request(req.body, chat ? Endpoint::chat : Endpoint::completion);
  log_ignored(req.path, r.ignored);
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
  q.on_news = req.on_news;
  std::shared_ptr<models::Stream> seq;
  try {
    seq = engine_->submit(std::move(q));
  } catch (const models::RequestError& e) {
    std::string message = e.what();
    if (e.code() == "unsupported_chat_template") message += " (send the text to /v1/completions instead)";
    // The parser held every setting to its range: what the engine refuses of the sampling is what
    // the device cannot draw (Vulkan: top_k 1 to 256 at a temperature).
    const std::string param = e.field() == "sampling" ? "top_k" : e.field();
    throw ApiError(400, "invalid_request_error", message, param, e.code());
  }
  if (!seq) {
    ApiResponse res = error_response(ApiError(503, "server_error", "the server is busy: every slot and queue place is taken"));
    res.headers.emplace_back("Retry-After", "1");
    return res;
  }
  Answer a;
  a.seq = seq;
  a.chat = chat;
  a.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  a.model = r.model.empty() ? options_.model_name : r.model;
  a.created = std::time(nullptr);
  a.return_tokens = r.return_tokens;
  a.include_usage = r.include_usage;
  ++*open_;
  ApiResponse res;
  if (r.stream) {
    res.content_type = "text/event-stream";
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.stream = std::make_shared<CompletionStream>(std::move(a), open_);
    return res;
  }
  std::string text;
  std::vector<int32_t> ids;
  while (seq->take(text, &ids, 1000ms)) {
  }
  --*open_;
  if (!seq->error().empty()) throw ApiError(500, "server_error", "the model failed: " + seq->error());
  json choice{{"index", 0}, {"finish_reason", finish_reason(*seq)}, {"logprobs", nullptr}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  if (r.return_tokens) choice["tokens"] = ids;
  json body = a.body(chat ? "chat.completion" : "text_completion", json::array({choice}));
  body["usage"] = a.usage(ids);
  res.body = dump(body);
  return res;
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

}  // namespace iron::serve
