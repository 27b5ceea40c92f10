// Request bodies to CompletionRequest (request.hpp). Every value is type- and range-checked here,
// so the scheduler and the model only ever see settings they can run.
#include "serve/request.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace iron::serve {

using nlohmann::json;

std::string ApiError::json() const {
  nlohmann::json e{{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

void bad_request(const std::string& message, const std::string& param) {
  throw ApiError(400, "invalid_request_error", message, param);
}

namespace {

const char* kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const json& v) {
  bad_request("'" + field + "' must be " + want + ", not " + kind(v), field);
}

double number(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) wrong_type(field, "a number", v);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad_request("'" + field + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " + v.dump(),
                field);
  return x;
}

int64_t integer(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !(v.is_number_float() && std::nearbyint(v.get<double>()) == v.get<double>()))
    wrong_type(field, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad_request("'" + field + "' must be at most " + std::to_string(hi), field);
  const double d = v.is_number_float() ? v.get<double>() : 0;
  // 2^63 itself rounds to INT64_MAX's double: refused before the conversion would overflow.
  if (v.is_number_float() && !(d >= double(lo) && d <= double(hi) && d < 9223372036854775808.0))
    bad_request("'" + field + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", field);
  const int64_t x = v.is_number_float() ? int64_t(d) : v.get<int64_t>();
  if (x < lo || x > hi)
    bad_request("'" + field + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                    std::to_string(x),
                field);
  return x;
}

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) wrong_type(field, "a boolean", v);
  return v.get<bool>();
}

const std::string& string(const json& v, const std::string& field) {
  if (!v.is_string()) wrong_type(field, "a string", v);
  return v.get_ref<const std::string&>();
}

// A message's content: a string, or OpenAI's array of parts of which only "text" ones are read.
std::string content(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(field, "a string or an array of text parts", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(at, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text")
      bad_request("'" + at + "': only parts of type \"text\" are read by this model", at);
    auto t = part.find("text");
    if (t == part.end()) bad_request("'" + at + ".text' is missing", at + ".text");
    text += string(*t, at + ".text");
  }
  return text;
}

// The body as a JSON object, or a 400 saying what it is instead.
json body_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("the request body is not valid JSON");
  if (!j.is_object()) bad_request(std::string("the request body must be a JSON object, not ") + kind(j));
  return j;
}

}  // namespace

CompletionRequest parse_request(std::string_view body, Endpoint endpoint) {
  const json j = body_object(body);
  CompletionRequest r;
  r.endpoint = endpoint;
  bool has_input = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "model") {
      r.model = string(v, key);
    } else if (key == "messages" && endpoint == Endpoint::chat) {
      if (!v.is_array()) wrong_type(key, "an array of messages", v);
      if (v.empty()) bad_request("'messages' is empty", key);
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        const json& m = v[i];
        if (!m.is_object()) wrong_type(at, "an object", m);
        auto role = m.find("role");
        if (role == m.end()) bad_request("'" + at + ".role' is missing", at + ".role");
        std::string name = string(*role, at + ".role");
        if (name == "developer") name = "system";  // OpenAI's newer name for it
        if (name != "system" && name != "user" && name != "assistant")
          bad_request("'" + at + ".role' must be system, user or assistant, not '" + escaped(name, 40) + "'",
                      at + ".role");
        auto text = m.find("content");
        std::string said;
        if (text != m.end() && !text->is_null()) said = content(*text, at + ".content");
        else if (name != "assistant") bad_request("'" + at + ".content' is missing", at + ".content");
        r.messages.push_back({name, said});
      }
      has_input = true;
    } else if (key == "prompt" && endpoint == Endpoint::completion) {
      if (v.is_array()) {
        if (v.size() != 1 || !v[0].is_string())
          bad_request("'prompt' must be a string (or an array of one string; batches are not taken)", key);
        r.prompt = v[0].get<std::string>();
      } else {
        r.prompt = string(v, key);
      }
      has_input = true;
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      if (v.is_null()) continue;
      const int64_t n = integer(v, key, INT64_MIN, INT64_MAX);
      if (n <= 0) bad_request("'" + key + "' must be at least 1, got " + std::to_string(n), key);
      r.max_tokens = n;
    } else if (key == "temperature") {
      if (!v.is_null()) r.sampling.temperature = number(v, key, 0, 2);
    } else if (key == "top_p") {
      if (!v.is_null()) {
        r.sampling.top_p = number(v, key, 0, 1);
        if (r.sampling.top_p == 0) r.sampling.top_p = 1e-9;  // OpenAI takes 0: the most likely token alone
      }
    } else if (key == "top_k") {
      if (!v.is_null()) r.sampling.top_k = integer(v, key, 0, INT32_MAX);
    } else if (key == "seed") {
      if (v.is_null()) continue;
      // Any 64-bit value: negative seeds are their two's-complement bits.
      if (v.is_number_unsigned()) r.sampling.seed = v.get<uint64_t>();
      else r.sampling.seed = uint64_t(integer(v, key, INT64_MIN, INT64_MAX));
      r.seeded = true;
    } else if (key == "stop") {
      if (v.is_null()) continue;
      if (v.is_string()) {
        r.stop.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        if (v.size() > 4) bad_request("'stop' holds at most 4 strings, got " + std::to_string(v.size()), key);
        for (size_t i = 0; i < v.size(); ++i) r.stop.push_back(string(v[i], "stop[" + std::to_string(i) + "]"));
      } else {
        wrong_type(key, "a string or an array of strings", v);
      }
      for (const std::string& s : r.stop)
        if (s.empty()) bad_request("'stop' strings must not be empty", key);
    } else if (key == "stream") {
      if (!v.is_null()) r.stream = boolean(v, key);
    } else if (key == "stream_options") {
      if (v.is_null()) continue;
      if (!v.is_object()) wrong_type(key, "an object", v);
      for (auto o = v.begin(); o != v.end(); ++o) {
        if (o.key() == "include_usage") r.include_usage = boolean(o.value(), "stream_options.include_usage");
        else r.ignored.push_back("stream_options." + o.key());
      }
    } else if (key == "ignore_eos") {
      if (!v.is_null()) r.ignore_eos = boolean(v, key);
    } else if (key == "return_tokens") {
      if (!v.is_null()) r.return_tokens = boolean(v, key);
    } else if (key == "n") {
      if (!v.is_null() && integer(v, key, 1, INT32_MAX) != 1) bad_request("'n' must be 1: one choice per request", key);
    } else {
      r.ignored.push_back(key);
    }
  }
  if (!has_input)
    bad_request(endpoint == Endpoint::chat ? "'messages' is missing" : "'prompt' is missing",
                endpoint == Endpoint::chat ? "messages" : "prompt");
  if (!r.stream && j.contains("stream_options") && !j["stream_options"].is_null())
    bad_request("'stream_options' is only read when 'stream' is true", "stream_options");
  return r;
}

EmbeddingRequest parse_embedding_request(std::string_view body) {
  const json j = body_object(body);
  EmbeddingRequest r;
  bool has_input = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "model") {
      r.model = string(v, key);
    } else if (key == "input") {
      has_input = true;
      if (v.is_string()) {
        r.inputs.push_back(v.get<std::string>());
        continue;
      }
      if (!v.is_array()) wrong_type(key, "a string or an array of strings", v);
      if (v.empty()) bad_request("'input' is empty", key);
      if (v.size() > kMaxEmbeddingInputs)
        bad_request("'input' holds at most " + std::to_string(kMaxEmbeddingInputs) + " texts, got " +
                        std::to_string(v.size()),
                    key);
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].is_number() || v[i].is_array())
          bad_request("'input' takes texts: token ids are the model's own tokenizer's to make", key);
        r.inputs.push_back(string(v[i], "input[" + std::to_string(i) + "]"));
      }
    } else if (key == "encoding_format") {
      if (v.is_null()) continue;
      const std::string& f = string(v, key);
      if (f != "float" && f != "base64")
        bad_request("'encoding_format' must be float or base64, not '" + escaped(f, 40) + "'", key);
      r.base64 = f == "base64";
    } else if (key == "dimensions") {
      if (!v.is_null()) r.dimensions = integer(v, key, 1, int64_t(1) << 20);  // the model's size: the server's to check
    } else if (key == "prompt_name") {
      if (!v.is_null()) r.prompt_name = string(v, key);
    } else {
      r.ignored.push_back(key);
    }
  }
  if (!has_input) bad_request("'input' is missing", "input");
  return r;
}

}  // namespace iron::serve
