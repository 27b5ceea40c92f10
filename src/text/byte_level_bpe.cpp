// GPT-2 byte-level BPE: the text is cut into words by GPT-2's pre-tokenizer regex (written out
// by hand below), each word's bytes become byte-level characters, and merges apply by rank.
#include <queue>

#include "iron/error.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

using detail::CharClass;

struct Unit {
  size_t offset;
  uint32_t cp;
  CharClass cls;
};

std::vector<Unit> units_of(std::string_view text) {
  std::vector<Unit> units;
  units.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const detail::Utf8Unit u = detail::decode_utf8(text, i);
    // A byte that is not UTF-8 counts as punctuation ("other"): it joins neither words nor
    // spaces, and byte-level BPE still spells it with its byte token.
    const CharClass cls = u.valid ? detail::classify(u.cp) : CharClass::other;
    units.push_back({i, u.valid ? u.cp : 0xFFFFFFFFu, cls});
    i += u.len;
  }
  return units;
}

/// GPT-2's pattern over units [begin, end):
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// Each alternative is tried in order at the current position, as the regex engine does.
void split_gpt2(const std::vector<Unit>& u, size_t begin, size_t end, std::vector<size_t>& cuts) {
  const auto cp_at = [&](size_t i) { return i < end ? u[i].cp : 0u; };
  size_t i = begin;
  while (i < end) {
    size_t next = i + 1;
    const uint32_t c1 = cp_at(i + 1);
    const uint32_t c2 = cp_at(i + 2);
    if (u[i].cp == '\'' && (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')) {
      next = i + 2;
    } else if (u[i].cp == '\'' &&
               ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))) {
      next = i + 3;
    } else {
      // " ?X+": an optional single space, then a run of one class other than space.
      size_t start = i;
      if (u[i].cp == ' ' && i + 1 < end && u[i + 1].cls != CharClass::space) start = i + 1;
      const CharClass cls = u[start].cls;
      if (cls != CharClass::space) {
        next = start + 1;
        while (next < end && u[next].cls == cls) ++next;
      } else {
        size_t run_end = i + 1;
        while (run_end < end && u[run_end].cls == CharClass::space) ++run_end;
        // \s+(?!\S): the run up to the end, or all but its last space when a non-space
        // follows (that space then leads the next word); a single space falls to \s+.
        if (run_end == end || run_end - i == 1) {
          next = run_end;
        } else {
          next = run_end - 1;
        }
      }
    }
    cuts.push_back(next);
    i = next;
  }
}

bool is_cr_or_lf(const Unit& u) { return u.cp == '\r' || u.cp == '\n'; }
uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/// Llama 3's pattern (and Qwen2's, with max_digits 1) over units [begin, end):
///   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
///   \s*[\r\n]+|\s+(?!\S)|\s+
/// Case folding of the contractions covers ASCII only.
void split_llama3(const std::vector<Unit>& u, size_t begin, size_t end, size_t max_digits,
                  std::vector<size_t>& cuts) {
  const auto lower_at = [&](size_t i) { return i < end ? lower_ascii(u[i].cp) : 0u; };
  const auto run = [&](size_t from, CharClass cls) {
    while (from < end && u[from].cls == cls) ++from;
    return from;
  };
  size_t i = begin;
  while (i < end) {
    size_t next;
    const uint32_t c1 = lower_at(i + 1), c2 = lower_at(i + 2);
    const bool next_is_letter = i + 1 < end && u[i + 1].cls == CharClass::letter;
    if (u[i].cp == '\'' && (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')) {
      next = i + 2;
    } else if (u[i].cp == '\'' &&
               ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))) {
      next = i + 3;
    } else if (u[i].cls == CharClass::letter) {
      next = run(i, CharClass::letter);
    } else if (u[i].cls != CharClass::number && !is_cr_or_lf(u[i]) && next_is_letter) {
      next = run(i + 1, CharClass::letter);  // one leading space or symbol joins the word
    } else if (u[i].cls == CharClass::number) {
      next = i + 1;
      while (next < end && next - i < max_digits && u[next].cls == CharClass::number) ++next;
    } else if (u[i].cls == CharClass::other ||
               (u[i].cp == ' ' && i + 1 < end && u[i + 1].cls == CharClass::other)) {
      next = run(u[i].cls == CharClass::other ? i : i + 1, CharClass::other);
      while (next < end && is_cr_or_lf(u[next])) ++next;
    } else {
      const size_t run_end = run(i, CharClass::space);
      size_t last_newline = run_end;
      for (size_t k = i; k < run_end; ++k) {
        if (is_cr_or_lf(u[k])) last_newline = k;
      }
      if (last_newline < run_end) {
        next = last_newline + 1;  // \s*[\r\n]+: up to the last line break of the run
      } else if (run_end == end || run_end - i == 1) {
        next = run_end;
      } else {
        next = run_end - 1;
      }
    }
    cuts.push_back(next);
    i = next;
  }
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizerKind kind) {
  const std::vector<Unit> units = units_of(text);
  std::vector<size_t> cuts;  // unit index where each word ends
  if (kind == PreTokenizerKind::smollm) {
    // SmolLM's pre-tokenizer (Hugging Face: Digits(individual_digits) then ByteLevel) first
    // isolates every \p{N} character, then runs GPT-2's pattern within each stretch between
    // them, so lookahead never sees past a digit.
    size_t start = 0;
    for (size_t i = 0; i <= units.size(); ++i) {
      if (i < units.size() && units[i].cls != CharClass::number) continue;
      split_gpt2(units, start, i, cuts);
      if (i < units.size()) cuts.push_back(i + 1);
      start = i + 1;
    }
  } else if (kind == PreTokenizerKind::llama3) {
    split_llama3(units, 0, units.size(), 3, cuts);
  } else if (kind == PreTokenizerKind::qwen2) {
    split_llama3(units, 0, units.size(), 1, cuts);
  } else {
    split_gpt2(units, 0, units.size(), cuts);
  }
  std::vector<std::string_view> words;
  words.reserve(cuts.size());
  size_t begin_byte = 0;
  for (const size_t cut : cuts) {
    const size_t end_byte = cut < units.size() ? units[cut].offset : text.size();
    words.push_back(text.substr(begin_byte, end_byte - begin_byte));
    begin_byte = end_byte;
  }
  return words;
}

namespace {

struct Part {
  int32_t id;
  int prev;
  int next;
};

struct Candidate {
  int32_t rank;
  int left;
  int32_t left_id;
  int32_t right_id;
  // Lowest rank first, then leftmost: a min-heap through std::priority_queue.
  bool operator<(const Candidate& o) const {
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

}  // namespace

void Tokenizer::Impl::merge_by_rank(std::vector<int32_t>& ids) const {
  std::vector<Part> parts;
  parts.reserve(ids.size());
  for (const int32_t id : ids) {
    const int index = int(parts.size());
    parts.push_back({id, index - 1, index + 1});
  }
  if (parts.empty()) return;
  parts.back().next = -1;

  std::priority_queue<Candidate> queue;
  const auto try_pair = [&](int left) {
    if (left < 0) return;
    const int right = parts[size_t(left)].next;
    if (right < 0) return;
    const int32_t a = parts[size_t(left)].id;
    const int32_t b = parts[size_t(right)].id;
    if (const auto it = merges.find(pair_key(a, b)); it != merges.end()) {
      queue.push({it->second.rank, left, a, b});
    }
  };
  for (int i = 0; i + 1 < int(parts.size()); ++i) try_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Part& l = parts[size_t(top.left)];
    // Stale when either side has changed since the pair was queued (merged parts get id -1).
    if (l.id != top.left_id || l.next < 0 || parts[size_t(l.next)].id != top.right_id) continue;
    Part& r = parts[size_t(l.next)];
    l.id = merges.at(pair_key(top.left_id, top.right_id)).result;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) parts[size_t(r.next)].prev = top.left;
    try_pair(l.prev);
    try_pair(top.left);
  }
  ids.clear();
  for (int i = 0; i >= 0; i = parts[size_t(i)].next) ids.push_back(parts[size_t(i)].id);
}

void Tokenizer::Impl::encode_byte_level_word(std::string_view word,
                                             std::vector<int32_t>& out) const {
  if (ignore_merges) {
    std::string mapped;
    for (const char c : word) detail::append_utf8(mapped, detail::byte_to_unicode(uint8_t(c)));
    if (const auto it = id_of.find(mapped); it != id_of.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  for (const char c : word) {
    int32_t id = byte_char_token[uint8_t(c)];
    if (id < 0) {
      if (!unk) {
        value_error("tokenizer: cannot encode byte " + std::to_string(int(uint8_t(c))) +
                    ": the vocabulary has neither its byte-level character nor an unknown token");
      }
      id = *unk;
    }
    ids.push_back(id);
  }
  merge_by_rank(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

void Tokenizer::Impl::encode_byte_level(std::string_view text, std::vector<int32_t>& out) const {
  // Bounded memory: at most this many words, each at most this long (long runs are rare and
  // would make the cache a copy of the input).
  constexpr size_t kMaxCachedWords = 1 << 16;
  constexpr size_t kMaxCachedWordBytes = 256;
  for (const std::string_view word : pretokenize(text, pre)) {
    const std::string key(word);
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      if (const auto it = word_cache.find(key); it != word_cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> ids;
    encode_byte_level_word(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (key.size() > kMaxCachedWordBytes) continue;
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (word_cache.size() >= kMaxCachedWords) word_cache.clear();
    word_cache.emplace(key, std::move(ids));
  }
}

}  // namespace iron::text
