// BERT's WordPiece: Hugging Face's BertNormalizer, BertPreTokenizer and WordPiece model, over the
// stretches of text between special tokens (Tokenizer::encode splits those out first, as
// Hugging Face does with added tokens that are not normalised).
#include <algorithm>

#include "text/bert_tables.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

using detail::BertClass;

BertClass bert_class(uint32_t cp) {
  // The last run starting at or before cp.
  const uint32_t* end = detail::kBertClassRuns + detail::kBertClassRunCount;
  const uint32_t* it = std::upper_bound(detail::kBertClassRuns, end, (cp << 2) | 3u);
  return BertClass(*(it - 1) & 3u);
}

const detail::CodepointMapping* find_mapping(const detail::CodepointMapping* table, size_t n,
                                             uint32_t cp) {
  const detail::CodepointMapping* end = table + n;
  const auto* it = std::lower_bound(
      table, end, cp, [](const detail::CodepointMapping& m, uint32_t c) { return m.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

bool is_white_space(uint32_t cp) {
  return detail::classify(cp) == detail::CharClass::space;
}

/// The CJK ideograph blocks BERT puts spaces around (its _is_chinese_char; not Hangul, kana).
bool is_chinese_char(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/// Appends the canonical decomposition of cp (Hangul syllables by the Unicode algorithm).
void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  constexpr uint32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
  constexpr uint32_t v_count = 21, t_count = 28, n_count = v_count * t_count;
  if (cp >= s_base && cp < s_base + 19 * n_count) {
    const uint32_t s = cp - s_base;
    out.push_back(l_base + s / n_count);
    out.push_back(v_base + (s % n_count) / t_count);
    if (s % t_count != 0) out.push_back(t_base + s % t_count);
    return;
  }
  const auto* m = find_mapping(detail::kDecompositions, detail::kDecompositionCount, cp);
  if (!m) {
    out.push_back(cp);
    return;
  }
  for (const uint32_t c : m->to) {
    if (c != 0) out.push_back(c);
  }
}

}  // namespace

std::string bert_normalize(std::string_view text, const WordPieceOptions& options) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  std::vector<uint32_t> chars;
  for (size_t i = 0; i < text.size();) {
    const detail::Utf8Unit u = detail::decode_utf8(text, i);
    i += u.len;
    const uint32_t cp = u.valid ? u.cp : 0xFFFD;
    chars.clear();
    if (options.clean_text) {
      if (cp == 0 || cp == 0xFFFD || bert_class(cp) == BertClass::control) continue;
      if (is_white_space(cp)) {
        out += ' ';
        continue;
      }
    }
    if (options.chinese_chars && is_chinese_char(cp)) {
      out += ' ';
      detail::append_utf8(out, cp);
      out += ' ';
      continue;
    }
    // Accents go before lower-casing, as Hugging Face orders them ('İ' loses its dot first).
    // Canonical reordering of marks is not needed: the marks it would move are dropped.
    if (options.strip_accents) {
      decompose(cp, chars);
    } else {
      chars.push_back(cp);
    }
    for (const uint32_t c : chars) {
      if (options.strip_accents && bert_class(c) == BertClass::mark) continue;
      const auto* lower =
          options.lowercase ? find_mapping(detail::kLowercase, detail::kLowercaseCount, c) : nullptr;
      if (!lower) {
        detail::append_utf8(out, c);
        continue;
      }
      for (const uint32_t l : lower->to) {
        if (l != 0) detail::append_utf8(out, l);
      }
    }
  }
  return out;
}

std::vector<std::string_view> bert_pretokenize(std::string_view normalized) {
  std::vector<std::string_view> words;
  size_t word_start = 0;
  for (size_t i = 0; i < normalized.size();) {
    const detail::Utf8Unit u = detail::decode_utf8(normalized, i);
    const uint32_t cp = u.valid ? u.cp : 0xFFFD;
    const bool space = is_white_space(cp);
    const bool punct = !space && bert_class(cp) == BertClass::punctuation;
    if (space || punct) {
      if (i > word_start) words.push_back(normalized.substr(word_start, i - word_start));
      if (punct) words.push_back(normalized.substr(i, u.len));
      word_start = i + u.len;
    }
    i += u.len;
  }
  if (normalized.size() > word_start) words.push_back(normalized.substr(word_start));
  return words;
}

void Tokenizer::Impl::encode_wordpiece(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = bert_normalize(text, wordpiece);
  for (const std::string_view word : bert_pretokenize(normalized)) {
    encode_wordpiece_word(word, out);
  }
}

void Tokenizer::Impl::encode_wordpiece_word(std::string_view word,
                                            std::vector<int32_t>& out) const {
  // Where each character starts, so pieces end on character boundaries.
  std::vector<size_t> starts;
  for (size_t i = 0; i < word.size(); i += detail::decode_utf8(word, i).len) starts.push_back(i);
  if (starts.size() > wordpiece.max_chars_per_word) {
    out.push_back(*unk);
    return;
  }
  starts.push_back(word.size());
  // Greedy longest match from the left; a stretch no piece covers makes the whole word [UNK].
  const size_t first_out = out.size();
  std::string piece;
  size_t begin = 0;  // index into starts
  while (begin + 1 < starts.size()) {
    size_t end = starts.size() - 1;
    int32_t found = -1;
    for (; end > begin; --end) {
      piece.assign(begin > 0 ? wordpiece.prefix : std::string());
      piece.append(word.substr(starts[begin], starts[end] - starts[begin]));
      const auto it = id_of.find(piece);
      if (it != id_of.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      out.resize(first_out);
      out.push_back(*unk);
      return;
    }
    out.push_back(found);
    begin = end;
  }
}

}  // namespace iron::text
