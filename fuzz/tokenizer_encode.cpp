// Arbitrary bytes as text into the real tokenizers (stories260K, and SmolLM2 and Gemma 3 when
// present): encode, decode, stream-decode; all round-trip the text exactly. all-MiniLM-L6-v2's
// WordPiece (when present) normalises, so it is held to well-formed sentences instead.
#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>

#include "iron/io/gguf.hpp"
#include "targets.hpp"
#include "tokenizer_util.hpp"

namespace iron::fuzz {
namespace {

struct RealTokenizers {
  std::unique_ptr<text::Tokenizer> stories, smollm2, gemma3, minilm;
  // Bytes that come back from encoding them alone: a byte-level vocabulary may lack the
  // characters of bytes no UTF-8 text holds (SmolLM2 has none for 0xC0, 0xC1, 0xF5..0xFF), and
  // those encode as the unknown token.
  std::array<bool, 256> smollm2_lossless{};
};

std::unique_ptr<text::Tokenizer> load(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "tokenizer_encode: %s is absent; skipped\n", path.c_str());
    return nullptr;
  }
  return std::make_unique<text::Tokenizer>(text::tokenizer_from_gguf(io::GgufFile::open(path)));
}

const RealTokenizers& tokenizers() {
  static const RealTokenizers t = [] {
    RealTokenizers r{load(shared_model_path("stories260K.gguf")),
                     load(local_model_path("SmolLM2-135M-Instruct.Q4_1.gguf")),
                     load(local_model_path("gemma-3-270m-q4_k_m.gguf")),
                     nullptr,
                     {}};
    const std::string minilm = local_model_path("all-MiniLM-L6-v2/tokenizer.json");
    if (std::filesystem::exists(minilm)) {
      r.minilm = std::make_unique<text::Tokenizer>(text::from_hf_tokenizer_json(minilm));
    } else {
      std::fprintf(stderr, "tokenizer_encode: %s is absent; skipped\n", minilm.c_str());
    }
    for (int b = 0; b < 256 && r.smollm2; ++b) {
      const std::string one(1, char(b));
      r.smollm2_lossless[size_t(b)] =
          r.smollm2->decode(r.smollm2->encode(one, false, false)) == one;
    }
    return r;
  }();
  return t;
}

}  // namespace

void tokenizer_encode(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto& stories = tokenizers().stories) {
    // SentencePiece with byte fallback: the prefix space aside, every byte comes back, except
    // that U+2581 written in the text is SentencePiece's own space marker and decodes as a space
    // (as in llama.cpp and SentencePiece).
    const std::vector<int32_t> ids = exercise(*stories, text);
    text::DecodeOptions strip;
    strip.strip_prefix_space = true;
    if (text.find("\xE2\x96\x81") == std::string_view::npos)
      IRON_FUZZ_CHECK(stories->decode(ids, strip) == text);
  }
  if (const auto& gemma3 = tokenizers().gemma3) {
    // SentencePiece without a prefix space, user-defined whitespace runs matched whole (a U+2581
    // in the text counts as a space there too, and decodes as one).
    const std::vector<int32_t> ids = exercise(*gemma3, text);
    if (text.find("\xE2\x96\x81") == std::string_view::npos)
      IRON_FUZZ_CHECK(gemma3->decode(ids) == text);
  }
  if (const auto& smollm2 = tokenizers().smollm2) {
    // Byte-level BPE is lossless for bytes the vocabulary has.
    const std::vector<int32_t> ids = exercise(*smollm2, text);
    const bool lossless = std::all_of(text.begin(), text.end(), [&](char c) {
      return tokenizers().smollm2_lossless[uint8_t(c)];
    });
    if (lossless) IRON_FUZZ_CHECK(smollm2->decode(ids) == text);
  }
  if (const auto& minilm = tokenizers().minilm) {
    exercise(*minilm, text);
    const std::vector<int32_t> ids = minilm->encode_sentence(text, 256);
    IRON_FUZZ_CHECK(ids.size() >= 2 && ids.size() <= 256);
    IRON_FUZZ_CHECK(ids.front() == minilm->bos_id() && ids.back() == minilm->eos_id());
    for (const int32_t id : ids) IRON_FUZZ_CHECK(id >= 0 && id < minilm->vocab_size());
  }
}

}  // namespace iron::fuzz
