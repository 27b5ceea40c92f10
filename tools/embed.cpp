// `iron embed -m MODEL [-p TEXT]... [-f FILE] [--prompt-name NAME] [--dimensions N] [--format json|tsv]
//  [--normalize/--no-normalize] [--similarity]`: sentence embeddings with a sentence encoder
//  (BERT-family or EmbeddingGemma), one vector per input.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "iron/error.hpp"
#include "iron/io/files.hpp"
#include "iron/models/encoder.hpp"
#include "serve/embeddings.hpp"

namespace iron::tools {

namespace {

// Lines of a file: one input each (an empty line is an empty text); a final newline ends the
// last line rather than starting another; "\r\n" endings lose their "\r".
std::vector<std::string> read_lines(const std::string& path) {
  const std::string text = io::read_file(path, size_t(256) << 20, "the input file");
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  return lines;
}

std::string joined(const std::vector<float>& v, const char* separator) {
  std::string line;
  for (size_t j = 0; j < v.size(); ++j) line += (j ? separator : "") + serve::f32_text(v[j]);
  return line;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

void write(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

}  // namespace

void add_embed_command(CLI::App& app, bool execute) {
  struct Options {
    std::string model, file, format = "json", precision = "highest", device = "cpu";
    std::optional<std::string> prompt_name;  // unset: the model's default
    int64_t dimensions = 0;                  // 0: all of them
    std::vector<std::string> prompts;
    std::optional<bool> normalize;  // unset: as the model says
    bool normalize_flag = false, no_normalize_flag = false;
    bool similarity = false;
    int threads = 0;
    int64_t batch = 32;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "Sentence embeddings with a sentence encoder (all-MiniLM-L6-v2: scripts/fetch-model.sh minilm; "
      "EmbeddingGemma-300M: scripts/fetch-model.sh embeddinggemma): one vector per prompt and per line of the "
      "file, batched by length; --similarity prints their cosines instead.");
  cmd->add_option("-m,--model", o->model,
                  "The encoder: a Hugging Face directory (config.json, model.safetensors, tokenizer.json, and the "
                  "sentence-transformers configs)")
      ->required();
  cmd->add_option("-p,--prompt", o->prompts, "A text to embed (repeatable)");
  cmd->add_option("-f,--file", o->file, "A file of texts, one per line (each line one vector, an empty one included)");
  cmd->add_option("--prompt-name", o->prompt_name,
                  "The model's prompt to put before each text, by name (config_sentence_transformers.json: "
                  "EmbeddingGemma's query, document, Clustering, STS, ...; 'none' for none). Default: the "
                  "model's default prompt, if it names one");
  add_integer(*cmd, "--dimensions", o->dimensions, 1, 1 << 20,
              "Keep the first N values of each vector (Matryoshka: EmbeddingGemma's 768, 512, 256 or 128), "
              "L2-normalised again when the vectors are normalised");
  cmd->add_option("--format", o->format,
                  "json: OpenAI's embeddings response ({\"data\": [{\"index\", \"embedding\"}]}); tsv: one line of "
                  "tab-separated values per input")
      ->check(CLI::IsMember({"json", "tsv"}))
      ->capture_default_str();
  // Two flags: CLI11 writes a flag pair's std::optional<bool> as false when neither is given,
  // which overrode the model's own modules.json.
  CLI::Option* normalize = cmd->add_flag(
      "--normalize", o->normalize_flag, "L2-normalise the vectors (default: as the model's sentence-transformers modules.json says)");
  cmd->add_flag("--no-normalize", o->no_normalize_flag, "Leave the pooled vectors as they are")->excludes(normalize);
  cmd->add_flag("--similarity", o->similarity, "Print the cosine similarity matrix of the inputs (two or more)");
  add_integer(*cmd, "-t,--threads", o->threads, 0, 256, "Threads to use (0: every core)");
  cmd->add_option("--device", o->device,
                  "Where the encoder runs: cpu, or vulkan (the GPU IRON_VULKAN_DEVICE names, else a discrete "
                  "GPU, else an integrated one, else Mesa's lavapipe)")
      ->check(CLI::IsMember({"cpu", "vulkan"}))
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "How matmuls may round: highest (f32 sums rounded once), high, or medium")
      ->check(CLI::IsMember({"highest", "high", "medium"}))
      ->capture_default_str();
  add_integer(*cmd, "-b,--batch-size", o->batch, 1, 4096, "Sentences per call at most");
  cmd->callback([o, execute] {
    if (!execute) return;
    if (o->normalize_flag) o->normalize = true;
    if (o->no_normalize_flag) o->normalize = false;
    std::vector<std::string> texts = o->prompts;
    if (!o->file.empty()) {
      std::vector<std::string> lines = read_lines(o->file);
      texts.insert(texts.end(), lines.begin(), lines.end());
    }
    if (texts.empty()) value_error("embed: nothing to embed (give -p TEXT or -f FILE)");
    if (o->similarity && texts.size() < 2) value_error("embed: --similarity needs two or more inputs");
    models::EncoderOptions options;
    options.precision = precision_from_name(o->precision);
    options.threads = o->threads;
    options.device = o->device;
    options.normalize = o->normalize;
    options.max_batch = o->batch;
    auto encoder = models::SentenceEncoder::open(o->model, options);
    if (o->dimensions > encoder->dim())
      value_error("embed: --dimensions " + std::to_string(o->dimensions) + " is more than the model's " +
                  std::to_string(encoder->dim()));
    const std::string prompt = o->prompt_name == "none" ? "" : encoder->prompt(o->prompt_name);
    std::vector<std::vector<int32_t>> ids;
    int64_t tokens = 0;
    for (const std::string& t : texts) {
      ids.push_back(encoder->ids(t, prompt));
      tokens += int64_t(ids.back().size());
    }
    // Progress for long inputs, at most once a second.
    const auto began = std::chrono::steady_clock::now();
    auto last = began;
    const bool show = texts.size() >= 256;
    auto progress = [&](size_t done, size_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (!show || (done < total && now - last < std::chrono::seconds(1))) return;
      last = now;
      const double seconds = std::chrono::duration<double>(now - began).count();
      std::fprintf(stderr, "embed: %zu/%zu inputs (%.1f/s)\n", done, total, double(done) / std::max(seconds, 1e-9));
    };
    std::vector<std::vector<float>> vectors = encoder->embed_ids(ids, progress);
    if (o->dimensions > 0) models::truncate_dimensions(vectors, o->dimensions, encoder->normalizes());
    const std::string model_name = std::filesystem::path(o->model).filename().string().empty()
                                       ? std::filesystem::path(o->model).parent_path().filename().string()
                                       : std::filesystem::path(o->model).filename().string();
    if (o->similarity) {
      std::vector<std::vector<double>> m(vectors.size(), std::vector<double>(vectors.size()));
      for (size_t i = 0; i < vectors.size(); ++i)
        for (size_t j = 0; j < vectors.size(); ++j) m[i][j] = cosine(vectors[i], vectors[j]);
      if (o->format == "json") {
        write(nlohmann::ordered_json({{"object", "similarity"}, {"model", model_name}, {"similarity", m}}).dump() +
              "\n");
      } else {
        for (const auto& row : m) {
          std::string line;
          for (size_t j = 0; j < row.size(); ++j) line += (j ? "\t" : "") + serve::f32_text(row[j]);
          write(line + "\n");
        }
      }
      return;
    }
    if (o->format == "json") {
      write(serve::embeddings_json(vectors, model_name, tokens) + "\n");
    } else {
      for (const auto& v : vectors) write(joined(v, "\t") + "\n");
    }
  });
}

}  // namespace iron::tools
