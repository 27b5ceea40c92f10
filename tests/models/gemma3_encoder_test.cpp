// Gemma 3's blocks as a sentence encoder (Gemma3Encoder, SentenceEncoder): a tiny random model
// written from a formula against the float64 numpy reference (scripts/reference/
// gemma3_encoder_numpy.py --tiny writes tests/golden/tiny_gemma3_encoder.json from the same
// formula), on every CPU path and on Vulkan; and EmbeddingGemma-300M itself, when
// models/embeddinggemma-300m is present (scripts/fetch-model.sh embeddinggemma), against
// sentence-transformers (tests/golden/embeddinggemma_embeddings.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "devices/vulkan/vulkan_test_util.hpp"
#include "io/io_test_util.hpp"
#include "iron/dtype.hpp"
#include "iron/error.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/decoder.hpp"
#include "iron/models/describe.hpp"
#include "iron/models/encoder.hpp"
#include "iron/models/gemma3.hpp"
#include "iron/models/llama_config.hpp"
#include "sanitized.hpp"

namespace iron::models {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---- the tiny encoder ----------------------------------------------------------------------

// Element k of the tensor `name`: 0.5 sin(0.7 k + s) as f32, s the sum of the name's bytes / 10
// (gemma3_encoder_numpy.py's tiny_values).
std::vector<float> tiny_values(const std::string& name, int64_t count) {
  double s = 0;
  for (const unsigned char c : name) s += c;
  s /= 10.0;
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) v[size_t(k)] = float(0.5 * std::sin(0.7 * double(k) + s));
  return v;
}

void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                       const std::string& prefix = "") {
  json header = json::object();
  std::vector<uint8_t> data;
  for (const auto& [name, shape] : tensors) {
    int64_t count = 1;
    for (const int64_t d : shape) count *= d;
    const std::vector<float> v = tiny_values(prefix + name, count);
    const size_t begin = data.size();
    data.resize(begin + v.size() * 4);
    std::memcpy(data.data() + begin, v.data(), v.size() * 4);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  const auto bytes = io::testing::safetensors_bytes(header.dump(), data);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A Gemma-style tokenizer.json: <pad> <eos> <bos> <unk>, the 256 byte tokens, U+2581, a to z,
// and the merges th, U+2581 th, he, U+2581 the.
json tiny_tokenizer() {
  const std::string space = "\xe2\x96\x81";
  json vocab = json::object();
  int id = 0;
  for (const char* t : {"<pad>", "<eos>", "<bos>", "<unk>"}) vocab[t] = id++;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = id++;
  }
  vocab[space] = id++;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = id++;
  for (const std::string& t : {std::string("th"), space + "th", std::string("he"), space + "the"}) vocab[t] = id++;
  const json added = json::array({{{"id", 0}, {"content", "<pad>"}, {"special", true}},
                       {{"id", 1}, {"content", "<eos>"}, {"special", true}},
                       {{"id", 2}, {"content", "<bos>"}, {"special", true}},
                       {{"id", 3}, {"content", "<unk>"}, {"special", true}}});
  return {{"model", {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"vocab", vocab},
                     {"merges", json::array({json::array({"t", "h"}), json::array({space, "th"}),
                                             json::array({"h", "e"}), json::array({space + "th", "e"})})}}},
          {"added_tokens", added},
          {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}}},
          {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}}}}, {{"Sequence", {{"id", "A"}}}},
                                    {{"SpecialToken", {{"id", "<eos>"}}}}})},
            {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {2}}}}, {"<eos>", {{"id", "<eos>"}, {"ids", {1}}}}}}}}};
}

// The tiny encoder's directory (gemma3_encoder_numpy.py's write_tiny, with a tokenizer and a
// prompt), removed with this object.
struct TinyEncoder {
  explicit TinyEncoder(bool bidirectional = true) {
    dir = fs::path(::testing::TempDir()) / ("iron_tiny_gemma3_encoder_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "1_Pooling");
    const json config = {{"model_type", "gemma3_text"}, {"use_bidirectional_attention", bidirectional},
                         {"hidden_size", 64}, {"num_hidden_layers", 3}, {"num_attention_heads", 2},
                         {"num_key_value_heads", 1}, {"head_dim", 32}, {"intermediate_size", 96},
                         {"vocab_size", 300}, {"max_position_embeddings", 64}, {"sliding_window", 8},
                         {"layer_types", {"sliding_attention", "sliding_attention", "full_attention"}},
                         {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                         {"query_pre_attn_scalar", 32}, {"rms_norm_eps", 1e-6},
                         {"hidden_activation", "gelu_pytorch_tanh"}};
    std::ofstream(dir / "config.json") << config.dump();
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"embed_tokens.weight", {300, 64}},
                                                                         {"norm.weight", {64}}};
    for (int l = 0; l < 3; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                               "post_feedforward_layernorm"})
        tensors.push_back({p + norm + ".weight", {64}});
      tensors.push_back({p + "self_attn.q_proj.weight", {64, 64}});
      tensors.push_back({p + "self_attn.k_proj.weight", {32, 64}});
      tensors.push_back({p + "self_attn.v_proj.weight", {32, 64}});
      tensors.push_back({p + "self_attn.o_proj.weight", {64, 64}});
      tensors.push_back({p + "self_attn.q_norm.weight", {32}});
      tensors.push_back({p + "self_attn.k_norm.weight", {32}});
      tensors.push_back({p + "mlp.gate_proj.weight", {96, 64}});
      tensors.push_back({p + "mlp.up_proj.weight", {96, 64}});
      tensors.push_back({p + "mlp.down_proj.weight", {64, 96}});
    }
    write_safetensors(dir / "model.safetensors", tensors);
    std::ofstream(dir / "1_Pooling" / "config.json") << R"({"pooling_mode_mean_tokens": true})";
    json modules = json::array({{{"type", "sentence_transformers.models.Transformer"}, {"path", ""}},
                                {{"type", "sentence_transformers.models.Pooling"}, {"path", "1_Pooling"}}});
    const struct {
      const char* path;
      int64_t in, out;
      bool bias;
    } dense[] = {{"2_Dense", 64, 128, false}, {"3_Dense", 128, 48, true}};
    for (const auto& d : dense) {
      fs::create_directories(dir / d.path);
      std::ofstream(dir / d.path / "config.json")
          << json({{"in_features", d.in}, {"out_features", d.out}, {"bias", d.bias}}).dump();
      std::vector<std::pair<std::string, std::vector<int64_t>>> t = {{"linear.weight", {d.out, d.in}}};
      if (d.bias) t.push_back({"linear.bias", {d.out}});
      write_safetensors(dir / d.path / "model.safetensors", t, std::string(d.path) + "/");
      modules.push_back({{"type", "sentence_transformers.models.Dense"}, {"path", d.path}});
    }
    modules.push_back({{"type", "sentence_transformers.models.Normalize"}, {"path", "4_Normalize"}});
    std::ofstream(dir / "modules.json") << modules.dump();
    std::ofstream(dir / "tokenizer.json") << tiny_tokenizer().dump();
    std::ofstream(dir / "config_sentence_transformers.json") << R"({"prompts": {"query": "q: ", "document": "d: "}})";
  }
  ~TinyEncoder() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  fs::path dir;
};

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += double(a[i]) * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

struct TinyGolden {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<double>> vectors;
};
const TinyGolden& tiny_golden() {
  static const TinyGolden g = [] {
    std::ifstream in(std::string(IRON_SOURCE_DIR) + "/tests/golden/tiny_gemma3_encoder.json");
    TinyGolden out;
    const json file = json::parse(in);
    for (const json& c : file["cases"]) {
      out.ids.push_back(c["ids"].get<std::vector<int32_t>>());
      out.vectors.push_back(c["vector"].get<std::vector<double>>());
    }
    return out;
  }();
  return g;
}

// Every golden sentence within `bound` of the reference's vector (cosine), and each value
// within `largest` of it.
void expect_tiny_golden(SentenceEncoder& e, double bound, double largest) {
  const TinyGolden& g = tiny_golden();
  ASSERT_EQ(g.ids.size(), 8u);
  const auto got = e.embed_ids(g.ids);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), g.vectors[i].size());
    EXPECT_GE(cosine(got[i], g.vectors[i]), bound) << "sentence " << i << " of " << g.ids[i].size() << " ids";
    for (size_t j = 0; j < got[i].size(); ++j)
      EXPECT_NEAR(got[i][j], g.vectors[i][j], largest) << "sentence " << i << " value " << j;
  }
}

TEST(Gemma3Encoder, TinyMatchesTheNumpyReference) {
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string());
  EXPECT_EQ(e->family(), "gemma3");
  EXPECT_EQ(e->dim(), 48);  // the last dense module's
  EXPECT_TRUE(e->normalizes());
  EXPECT_EQ(e->sentence_config().max_seq_length, 64);
  expect_tiny_golden(*e, 0.99999, 1e-4);
}

TEST(Gemma3Encoder, TinyAtMediumStaysClose) {
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string(), {.precision = Precision::medium});
  expect_tiny_golden(*e, 0.999, 2e-2);
}

TEST(Gemma3Encoder, TinyOnVulkanMatchesTheNumpyReference) {
  IRON_NEEDS_VULKAN();
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string(), {.device = "vulkan"});
  expect_tiny_golden(*e, 0.99999, 1e-4);
}

// A batch of sentences of different lengths (one bucket, padding rows) gives each sentence's
// vector alone.
TEST(Gemma3Encoder, ABatchEqualsOneSentenceAtATime) {
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string());
  const TinyGolden& g = tiny_golden();
  const auto together = e->embed_ids(g.ids);
  for (size_t i = 0; i < g.ids.size(); ++i) {
    const auto alone = e->embed_ids({g.ids[i]});
    for (size_t j = 0; j < alone[0].size(); ++j) EXPECT_NEAR(together[i][j], alone[0][j], 1e-5);
  }
}

// Text to ids through the model's tokenizer.json: <bos> ... <eos>, merges by rank, bytes the
// vocabulary lacks as <0xNN>, and a prompt put before the text.
TEST(Gemma3Encoder, TokenizesWithPrompts) {
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string());
  // "the theme": th e <U+2581>the m e; the ids of a..z are 261.., th 287, <U+2581>the 290.
  EXPECT_EQ(e->ids("the theme"), (std::vector<int32_t>{2, 287, 265, 290, 273, 265, 1}));
  EXPECT_EQ(e->ids("\xc3\xa9"), (std::vector<int32_t>{2, 4 + 0xC3, 4 + 0xA9, 1}));  // e-acute: two byte tokens
  EXPECT_EQ(e->prompt("query"), "q: ");
  EXPECT_EQ(e->prompt(), "");  // no default prompt
  EXPECT_EQ(e->ids("the", e->prompt("query")), (std::vector<int32_t>{2, 277, 4 + ':', 290, 1}));
  try {
    e->prompt("passage");
    ADD_FAILURE() << "an unknown prompt was taken";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("document, query"), std::string::npos) << err.what();
  }
  // A text longer than max_seq_length keeps its first 62 ids between <bos> and <eos>.
  const auto cut = e->ids(std::string(200, 'a'));
  ASSERT_EQ(cut.size(), 64u);
  EXPECT_EQ(cut.front(), 2);
  EXPECT_EQ(cut.back(), 1);
}

// Matryoshka truncation: the first N values, L2-normalised again.
TEST(Gemma3Encoder, DimensionsCutAndRenormalise) {
  TinyEncoder tiny;
  auto e = SentenceEncoder::open(tiny.dir.string());
  const auto full = e->embed_ids({tiny_golden().ids[5]});
  auto cut = full;
  truncate_dimensions(cut, 16);
  ASSERT_EQ(cut[0].size(), 16u);
  double norm = 0, head = 0;
  for (size_t i = 0; i < 16; ++i) norm += double(cut[0][i]) * cut[0][i], head += double(full[0][i]) * full[0][i];
  EXPECT_NEAR(norm, 1.0, 1e-6);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(cut[0][i], full[0][i] / std::sqrt(head), 1e-6);
  for (const int64_t bad : {int64_t(0), int64_t(49), int64_t(-1)}) {
    auto v = full;
    EXPECT_THROW(truncate_dimensions(v, bad), Error) << bad;
  }
}

// A Gemma 3 attending one way is a decoder: the encoder refuses it, and a decoder graph refuses
// a bidirectional config.
TEST(Gemma3Encoder, OneWayAndTwoWayAreTold) {
  TinyEncoder one_way(/*bidirectional=*/false);
  try {
    SentenceEncoder::open(one_way.dir.string());
    ADD_FAILURE() << "opened a decoder as an encoder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(is_sentence_encoder(one_way.dir.string()));
  TinyEncoder two_way;
  EXPECT_TRUE(is_sentence_encoder(two_way.dir.string()));
  const LlamaConfig c = llama_config_from_hf(io::read_json_file((two_way.dir / "config.json").string()));
  EXPECT_TRUE(c.bidirectional);
  EXPECT_EQ(encoder_window(c), 5);  // sliding_window 8: 8 / 2 + 1, as transformers
  try {
    make_decoder(c);
    ADD_FAILURE() << "a decoder graph took a bidirectional config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sentence encoder"), std::string::npos) << e.what();
  }
}

// `iron info DIR`: the directory's safetensors, its config (attending both ways) and the
// sentence-transformers pipeline after the model.
TEST(Gemma3Encoder, InfoDescribesTheDirectory) {
  TinyEncoder tiny;
  const std::string text = describe_checkpoint(tiny.dir.string(), {.tensors = false});
  for (const char* want : {"attending both ways (a sentence encoder)",
                           "sentence encoder: mean pooling, dense 64 -> 128, dense 128 -> 48, normalised, vectors of 48, "
                           "sentences cut at 64 tokens, prompts: document query (none by default)",
                           "tokenizer: metaspace-bpe"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\nin:\n" << text;
  fs::remove(tiny.dir / "model.safetensors");
  EXPECT_THROW(describe_checkpoint(tiny.dir.string()), Error);
}

// ---- EmbeddingGemma-300M against sentence-transformers ---------------------------------------

const std::string kEmbeddingGemma = io::testing::local_model_path("embeddinggemma-300m");

#define IRON_NEEDS_EMBEDDINGGEMMA() \
  IRON_NEEDS_MODEL(kEmbeddingGemma + "/model.safetensors", "embeddinggemma (or IRON_FETCH_LARGE=1 scripts/test.sh)")

struct EmbeddingGemmaGolden {
  std::vector<std::string> texts;
  std::vector<std::optional<std::string>> prompts;
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<double>> vectors;
};

const EmbeddingGemmaGolden& embeddinggemma_golden() {
  static const EmbeddingGemmaGolden g = [] {
    std::ifstream in(std::string(IRON_SOURCE_DIR) + "/tests/golden/embeddinggemma_embeddings.json");
    EmbeddingGemmaGolden out;
    const json file = json::parse(in);
    for (const json& c : file["cases"]) {
      out.texts.push_back(c["text"]);
      out.prompts.push_back(c["prompt_name"].is_null() ? std::nullopt : std::optional<std::string>(c["prompt_name"]));
      out.ids.push_back(c["ids"].get<std::vector<int32_t>>());
      // f16 little-endian, base64.
      const std::string text = c["vector"];
      std::vector<uint8_t> bytes;
      uint32_t bits = 0;
      int count = 0;
      for (const char ch : text) {
        const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char* at = std::strchr(digits, ch);
        if (!at || ch == '\0') continue;
        bits = (bits << 6) | uint32_t(at - digits);
        if ((count += 6) >= 8) bytes.push_back(uint8_t(bits >> (count -= 8)));
      }
      std::vector<double> v(bytes.size() / 2);
      for (size_t i = 0; i < v.size(); ++i) v[i] = f16_to_f32(uint16_t(bytes[2 * i] | bytes[2 * i + 1] << 8));
      out.vectors.push_back(std::move(v));
    }
    return out;
  }();
  return g;
}

double check_golden(SentenceEncoder& e, double bound) {
  const EmbeddingGemmaGolden& g = embeddinggemma_golden();
  const auto got = e.embed_ids(g.ids);
  double worst = 1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double c = cosine(got[i], g.vectors[i]);
    worst = std::min(worst, c);
    EXPECT_GE(c, bound) << "sentence " << i << " (" << g.ids[i].size() << " ids)";
  }
  return worst;
}

TEST(EmbeddingGemma, TokenizesAsSentenceTransformers) {
  IRON_NEEDS_EMBEDDINGGEMMA();
  auto e = SentenceEncoder::open(kEmbeddingGemma);
  const EmbeddingGemmaGolden& g = embeddinggemma_golden();
  ASSERT_GE(g.texts.size(), 200u);
  size_t prompted = 0, longest = 0;
  for (size_t i = 0; i < g.texts.size(); ++i) {
    EXPECT_EQ(e->ids(g.texts[i], e->prompt(g.prompts[i])), g.ids[i]) << escaped(g.texts[i], 60);
    prompted += g.prompts[i].has_value();
    longest += g.ids[i].size() == 2048;
  }
  EXPECT_GE(prompted, 40u);
  EXPECT_GE(longest, 4u);  // cut at max_seq_length, with and without a prompt
}

TEST(EmbeddingGemma, MatchesSentenceTransformersAtHighest) {
  IRON_NEEDS_EMBEDDINGGEMMA();
  auto e = SentenceEncoder::open(kEmbeddingGemma);
  EXPECT_EQ(e->dim(), 768);
  std::printf("worst cosine at highest: %.8f\n", check_golden(*e, 0.99999));
}

TEST(EmbeddingGemma, MediumStaysClose) {
  IRON_NEEDS_EMBEDDINGGEMMA();
  auto e = SentenceEncoder::open(kEmbeddingGemma, {.precision = Precision::medium});
  std::printf("worst cosine at medium: %.8f\n", check_golden(*e, 0.999));
}

}  // namespace
}  // namespace iron::models
