#include "iron/models/runner.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <new>

#include "graph/arena.hpp"
#include "graph/recording.hpp"
#include "iron/error.hpp"
#include "iron/functional.hpp"
#include "iron/io/gguf.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/log.hpp"
#include "ops/sample/sample.hpp"

#include <nlohmann/json.hpp>

namespace iron::models {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void check_in_vocabulary(const std::vector<int32_t>& ids, int64_t vocab) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) value_error("token id " + std::to_string(id) + " is outside the vocabulary");
}

// "2.06 GiB", or "5.2 MiB" under a GiB (a context too small to show in GiB still fails under a
// memory limit, and the message says what it costs).
std::string gib(int64_t bytes) {
  char text[32];
  if (bytes < (int64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(int64_t(1) << 20));
  else
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return text;
}

// What a context costs and how to ask for less.
std::string context_notice(int64_t bytes, const LlamaOptions& o) {
  return "a context of " + std::to_string(o.context) + " rows (+ " + std::to_string(o.chunk) +
         " batch rows) takes " + gib(bytes) + " (KV cache and RoPE table); ask for less with -c/--ctx-size, "
         "-b/--batch-size or a smaller cache type (--cache-type-k/--cache-type-v f16, q8_0)";
}

// The config against the weights, before anything is sized from it: a count the file's weights
// do not bear out (a GGUF claiming 4,096 blocks, a config.json with head_dim 4096) is refused
// naming the count, its value and what the weights hold, instead of a context of gigabytes
// announced first and a list of thousands of missing tensors after.
void check_against_weights(const LlamaConfig& c, const StateDict& weights, const std::string& where) {
  int64_t held = 0;  // 1 + the highest layer number among the weights
  for (const auto& [name, tensor] : weights.items()) {
    if (name.rfind("layers.", 0) != 0) continue;
    int64_t layer = 0;
    const char* digits = name.data() + 7;
    const auto [end, error] = std::from_chars(digits, name.data() + name.size(), layer);
    if (error == std::errc() && end != digits && *end == '.') held = std::max(held, layer + 1);
  }
  if (c.layers > held)
    value_error(where + ": the config's layer count " + std::to_string(c.layers) + " is more than the weights hold: " +
                (held > 0 ? std::to_string(held) + " (layers.0 to layers." + std::to_string(held - 1) + ")" : "none"));
  if (!weights.contains("layers.0.attn.q")) return;  // load_state_dict names what is missing
  const Tensor& q = weights.at("layers.0.attn.q");
  if (q.shape().size() == 2 && q.shape()[0] != c.heads * c.head_dim)
    value_error(where + ": the config's head size (head_dim) " + std::to_string(c.head_dim) + " does not fit the weights: " +
                std::to_string(c.heads) + " heads of it make " + std::to_string(c.heads * c.head_dim) +
                " query rows, and layers.0.attn.q has " + std::to_string(q.shape()[0]));
}

// The prefill version's `sampling` input: the settings' row.
Tensor settings_input(const SamplingRow& row) {
  return Tensor::from_ints(std::vector<int32_t>(row.words.begin(), row.words.end()), {kSampleSettingsWords});
}

// The prefill version's inputs: a chunk of prompt ids and the sampling settings.
Shapes prefill_shapes(int64_t chunk) {
  return {{"tokens", InputSpec({chunk}, i32)}, {"sampling", InputSpec({functional::kSampleSettingsWords}, i32)}};
}

}  // namespace

int64_t LlamaRunner::context_bytes(const LlamaConfig& c, const LlamaOptions& o) {
  // Each layer's two caches and the RoPE table hold context + chunk rows; computed in doubles, so that no option overflows it, and held to int64.
  const double rows = double(o.context) + double(o.chunk);
  const double row_bytes = double(storage_bytes(o.k_cache_type(), 1024) + storage_bytes(o.v_cache_type(), 1024)) / 1024.0;
  const double cache = double(o.slots) * double(c.layers) * rows * double(c.kv_heads) * double(c.head_dim) * row_bytes;
  const double total = cache + rows * double(c.head_dim) * 4;
  return total >= 9.0e18 ? INT64_MAX : int64_t(total);
}

std::unique_ptr<LlamaRunner> LlamaRunner::open(const std::string& path, const RunnerOptions& options) {
  namespace fs = std::filesystem;
  auto start = Clock::now();
  std::unique_ptr<LlamaRunner> r(new LlamaRunner());
  r->options_ = options;
  LlamaConfig config;
  std::string weights = path;
  // A path the system cannot look up (too long, not searchable) is taken for a file: opening it
  // says why in one line, where std::filesystem's exception would quote the whole path twice.
  std::error_code ec;
  const bool directory = fs::is_directory(path, ec);
  if (directory || fs::path(path).extension() == ".safetensors") {
    // A Hugging Face model: config.json (and tokenizer.json) beside model.safetensors.
    fs::path dir = directory ? fs::path(path) : fs::path(path).parent_path();
    weights = directory ? (dir / "model.safetensors").string() : path;
    if (!fs::exists(dir / "config.json", ec)) value_error(escaped_path(path) + ": a safetensors model needs config.json beside it");
    config = llama_config_from_hf(io::read_json_file((dir / "config.json").string()));
    if (fs::exists(dir / "tokenizer.json", ec))
      r->tokenizer_ = std::make_unique<text::Tokenizer>(text::from_hf_tokenizer_json((dir / "tokenizer.json").string()));
  } else {
    io::GgufFile gguf = io::GgufFile::open(path);
    config = llama_config_from_gguf(gguf);
    r->tokenizer_ = std::make_unique<text::Tokenizer>(text::tokenizer_from_gguf(gguf));
  }
  // Every id the model can sample must decode: checked here, not when generation reaches one.
  if (r->tokenizer_ && r->tokenizer_->vocab_size() < config.vocab)
    value_error(escaped_path(path) + ": the tokenizer has " + std::to_string(r->tokenizer_->vocab_size()) +
                " tokens, fewer than the model's vocabulary of " + std::to_string(config.vocab));
  LlamaOptions& mo = r->options_.model;
  mo.context = std::min(mo.context, config.context);
  mo.chunk = std::min(mo.chunk, mo.context);  // a prefill call never takes more than the context, as in llama.cpp
  r->weights_ = llama_state_dict(open_checkpoint(weights), config.architecture);
  check_against_weights(config, r->weights_, escaped_path(path));
  const int64_t context_bytes = LlamaRunner::context_bytes(config, mo);
  try {
    // The decoder refuses a config or options it cannot run, and load_state_dict weights that
    // do not fit it: both before the context's size is announced, so that a refusal is the one
    // line printed. Nothing is allocated until compile().
    r->model_ = make_decoder(config, mo);
    r->model_->set_profile(r->options_.profile);
    r->model_->load_state_dict(r->weights_);
    if (context_bytes > (int64_t(1) << 30)) log(LogLevel::warning, context_notice(context_bytes, mo));
    CompileOptions compile{.threads = options.threads, .device = options.device};
    r->model_->compile(prefill_shapes(mo.chunk), compile).load();
    r->model_->compile({}, compile).load();
  } catch (const OutOfMemory& e) {
    // What failed and its size, then what the context costs and the options that ask for less.
    throw e.with_hint(context_notice(context_bytes, mo));
  } catch (const std::bad_alloc&) {
    value_error("out of memory allocating the model: " + context_notice(context_bytes, mo));
  }
  r->load_seconds_ = seconds_since(start);
  return r;
}

const text::Tokenizer& LlamaRunner::tokenizer() const {
  if (!tokenizer_) value_error("this model came without a tokenizer (no tokenizer.json): give token ids");
  return *tokenizer_;
}

std::vector<int32_t> LlamaRunner::prompt_ids(const std::string& prompt, bool chat) const {
  tokenizer();  // a clear error when the model came without one
  if (chat) {
    const auto& tmpl = tokenizer_->chat_template();
    if (!text::recognise_chat_template(tmpl))
      log(LogLevel::warning, std::string(tmpl ? "the model's chat template is not one rendered here (ChatML, Gemma)"
                                              : "the model has no chat template") +
                                 ": the prompt is wrapped in ChatML instead");
    std::string text = tokenizer_->apply_chat_template({{"user", prompt}}, true, text::ChatTemplateFallback::chatml);
    return tokenizer_->encode(text, false);
  }
  bool bos = tokenizer_->add_bos_by_default() || prompt.empty();
  if (bos && !tokenizer_->bos_id()) {
    if (prompt.empty()) value_error("an empty prompt starts from BOS, and this model has none");
    bos = false;
  }
  return tokenizer_->encode(prompt, bos);
}

GenerateStats LlamaRunner::generate(const std::vector<int32_t>& prompt, int64_t max_tokens,
                                    const std::function<void(int32_t)>& on_token, bool stop_at_end,
                                    int64_t start, const std::atomic<bool>* interrupt, const Sampling* sampling) {
  GenerateStats stats;
  const LlamaOptions& mo = options_.model;
  const Sampling& sp = sampling ? *sampling : mo.sampling;
  // Checked before anything runs (a value error naming the setting), and encoded once.
  check_sampling(sp);
  std::array<Tensor, 2> inputs{Tensor::zeros({mo.chunk}, i32), settings_input(sp)};
  const int64_t context = mo.context, chunk = mo.chunk;
  if (prompt.empty()) value_error("generate: the prompt has no tokens");
  if (start < 0 || start >= context)
    value_error("generate: the cache holds " + std::to_string(context) + " positions; cannot continue after " +
                std::to_string(start));
  if (int64_t(prompt.size()) >= context - start)
    value_error("the prompt has " + std::to_string(prompt.size()) + " tokens" +
                (start ? " after " + std::to_string(start) + " already in the cache" : std::string()) +
                "; the context holds " + std::to_string(context) + " (raise -c up to the model's " +
                std::to_string(config().context) + ")");
  check_in_vocabulary(prompt, config().vocab);
  stats.prompt_tokens = int64_t(prompt.size());
  CompiledGraph& prefill = prefill_version();
  CompiledGraph& decode = decode_version();

  // Every chunk but the last as plain calls; the last starts the loop.
  auto t0 = Clock::now();
  Tensor& tokens = inputs[0];
  const int64_t total = int64_t(prompt.size());
  int64_t at = 0;
  CarriedLoop loop(prefill, decode, options_.depth);
  int32_t first = 0;
  while (at < total) {
    int64_t n = std::min(chunk, total - at);
    std::fill_n(tokens.mutable_data_as<int32_t>(), chunk, 0);
    std::memcpy(tokens.mutable_data(), prompt.data() + at, size_t(n) * 4);
    std::vector<ValueArg> values{{"position", start + at}, {"rows", n}, {"token", 0}, {"step", 0}};
    if (at + n < total) {
      prefill(std::span<const Tensor>(inputs), values);
    } else {
      const auto& result = loop.start(std::span<const Tensor>(inputs), values);
      first = result.outputs[1].data_as<int32_t>()[0];
    }
    at += n;
  }
  stats.prompt_seconds = seconds_since(t0);
  if (max_tokens == 0) {
    stats.stop = "token limit";
    return stats;
  }
  on_token(first);
  stats.generated_tokens = 1;
  if (stop_at_end && tokenizer_ && tokenizer_->is_end(first)) {
    stats.stop = "end of sequence";
    return stats;
  }
  auto interrupted = [&] { return interrupt && interrupt->load(std::memory_order_relaxed); };
  if (interrupted()) {
    stats.stop = "interrupted";
    return stats;
  }
  // Decode steps: step k embeds the token at position start + total + k and leaves the next at + 1.
  int64_t room = context - start - total - 1;
  // A negative max_tokens (llama.cpp's -n -1): until the end of sequence or a full context.
  int64_t steps = max_tokens < 0 ? room : std::min(max_tokens - 1, room);
  stats.stop = max_tokens < 0 || steps < max_tokens - 1 ? "context full" : "token limit";
  auto t1 = Clock::now();
  auto decode_steps = loop.steps(steps);
  for ([[maybe_unused]] int64_t k : decode_steps) {
    // The token this step sampled, as it carries it into the next: on a device that chains the
    // steps, read from memory the host maps while the steps after it run.
    const auto id = int32_t(decode_steps.carried("token"));
    on_token(id);
    ++stats.generated_tokens;
    if (stop_at_end && tokenizer_ && tokenizer_->is_end(id)) {
      stats.stop = "end of sequence";
      break;
    }
    if (interrupted()) {
      stats.stop = "interrupted";
      break;
    }
  }
  stats.generate_seconds = seconds_since(t1);
  return stats;
}

void LlamaRunner::check_sampling(const Sampling& s) const {
  s.check();
  if (options_.device == "vulkan" && s.temperature > 0 && !ops::vulkan_draws(s.top_k, config().vocab))
    value_error("Sample on the Vulkan device draws from at most " + std::to_string(ops::kVulkanMaxTopK) +
                " candidates: top_k " + std::to_string(s.top_k) + (s.top_k == 0 ? " (every token)" : "") +
                " runs on the CPU (--device cpu), or give a top_k of 1 to " + std::to_string(ops::kVulkanMaxTopK));
}

BatchDecoder& LlamaRunner::batch() {
  if (!batch_) batch_ = std::make_unique<BatchDecoder>(*model_, CompileOptions{.threads = options_.threads, .device = options_.device});
  return *batch_;
}

CompiledGraph& LlamaRunner::prefill_version() {
  CompileOptions compile{.threads = options_.threads, .device = options_.device};
  return model_->compile(prefill_shapes(options_.model.chunk), compile);
}

CompiledGraph& LlamaRunner::decode_version() {
  CompileOptions compile{.threads = options_.threads, .device = options_.device};
  return model_->compile({}, compile);
}

DeviceTime LlamaRunner::prefill_device_time() { return prefill_version().device_time(); }
DeviceTime LlamaRunner::decode_device_time() { return decode_version().device_time(); }

std::vector<std::pair<const Declaration*, Fields>> LlamaRunner::tunable_steps() {
  std::vector<std::pair<const Declaration*, Fields>> out;
  for (CompiledGraph* v : {&prefill_version(), &decode_version()})
    for (const Step& step : v->recording().steps) {
      const Declaration& d = step.op->declaration();
      bool tuned = false;
      for (const FieldDecl& t : d.tunables) tuned |= !t.candidates.empty();
      if (!tuned) continue;
      bool seen = false;
      for (const auto& [decl, params] : out) seen |= decl == &d && params == step.op->params();
      if (!seen) out.emplace_back(&d, step.op->params());
    }
  return out;
}

int64_t LlamaRunner::weight_bytes_per_token() const {
  int64_t bytes = 0;
  const LlamaConfig& c = config();
  for (const auto& [path, r] : model_->held()) {
    if (r->is_state || !weights_.contains(path)) continue;  // the graph's own tables are not read whole
    int64_t n = r->tensor.nbytes();
    // The embedding is read one row a step, unless it is also the classifier.
    if (path == "embed" && !c.tied_embeddings) n = n / c.vocab;
    bytes += n;
  }
  return bytes;
}

int64_t LlamaRunner::cache_bytes_per_token(int64_t keys) const {
  const LlamaConfig& c = config();
  const LlamaOptions& o = options_.model;
  const int64_t row = c.kv_heads * c.head_dim;
  return c.layers * keys * (storage_bytes(o.k_cache_type(), row) + storage_bytes(o.v_cache_type(), row));
}

int64_t LlamaRunner::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [path, r] : model_->held())
    if (r->is_state) bytes += storage_bytes(r->dtype, element_count(r->shape));
  return bytes;
}

int64_t LlamaRunner::scratch_bytes() const { return model_->arena().scratch_bytes(); }

Tensor LlamaRunner::score(const std::vector<int32_t>& prompt) {
  const int64_t n = int64_t(prompt.size());
  if (n == 0) value_error("score: the prompt has no tokens");
  if (!scorer_ || scorer_->options().chunk < n) {
    LlamaOptions o = options_.model;
    o.all_logits = true;
    o.chunk = std::max<int64_t>(n, 8);
    o.context = std::max(o.context, o.chunk);
    scorer_ = make_decoder(model_->config(), o);
    scorer_->load_state_dict(weights_);
  }
  const int64_t chunk = scorer_->options().chunk;
  CompiledGraph& v = scorer_->compile({{"tokens", InputSpec({chunk}, i32)}}, {.threads = options_.threads, .device = options_.device});
  Tensor tokens = Tensor::zeros({chunk}, i32);
  std::memcpy(tokens.mutable_data(), prompt.data(), size_t(n) * 4);
  std::vector<ValueArg> values{{"position", 0}, {"rows", n}, {"token", 0}, {"step", 0}};
  return v(std::span<const Tensor>(&tokens, 1), values).outputs[2].clone();
}

Tensor LlamaRunner::score_decoding(const std::vector<int32_t>& prompt) {
  const int64_t n = int64_t(prompt.size()), vocab = config().vocab;
  if (n == 0) value_error("score_decoding: the prompt has no tokens");
  if (n >= options_.model.context)
    value_error("score_decoding: " + std::to_string(n) + " tokens do not fit the context of " +
                std::to_string(options_.model.context));
  check_in_vocabulary(prompt, vocab);
  Tensor logits = Tensor::zeros({n, vocab}, f32);
  auto keep = [&](int64_t row, const Tensor& t) {
    std::memcpy(logits.mutable_data_as<float>() + row * vocab, t.data(), size_t(vocab) * 4);
  };
  CompiledGraph& prefill = prefill_version();
  const Sampling& sp = options_.model.sampling;
  std::array<Tensor, 2> inputs{Tensor::zeros({options_.model.chunk}, i32), settings_input(sp)};
  inputs[0].mutable_data_as<int32_t>()[0] = prompt[0];
  std::vector<ValueArg> first{{"position", 0}, {"rows", 1}, {"token", 0}, {"step", 0}};
  keep(0, prefill(std::span<const Tensor>(inputs), first).outputs[0]);
  CompiledGraph& decode = decode_version();
  for (int64_t k = 1; k < n; ++k) {
    std::vector<ValueArg> step{{"position", k}, {"token", prompt[size_t(k)]}, {"step", k}};
    keep(k, decode({}, step).outputs[0]);
  }
  return logits;
}

}  // namespace iron::models
