// SentencePiece BPE as llama.cpp runs it for "llama" vocabularies: start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring piece (leftmost
// on ties), then spell any character the vocabulary lacks as byte tokens <0xNN>. And the same
// kind of model as Hugging Face's tokenizer.json writes it (encode_metaspace): ranked merges in
// place of scores, and the byte tokens spelled before merging, as its BPE model does.
#include <algorithm>
#include <queue>

#include "iron/error.hpp"
#include "text/tokenizer_impl.hpp"
#include "text/unicode.hpp"

namespace iron::text {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t size;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // the merged size, to notice a pair whose symbols changed since it was queued

  // Highest score first; on a tie the leftmost pair, so the result does not depend on order.
  bool operator<(const Bigram& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_sentencepiece(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {
    const uint32_t len = detail::decode_utf8(text, i).len;
    const int index = int(symbols.size());
    symbols.push_back({index - 1, index + 1, i, len});
    i += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram> queue;
  const auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[size_t(left)];
    const Symbol& r = symbols[size_t(right)];
    const std::string_view joined = text.substr(l.offset, l.size + r.size);
    const auto it = piece_id.find(std::string(joined));
    if (it == piece_id.end()) return;
    queue.push({left, right, scores[size_t(it->second)], joined.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_pair(int(i) - 1, int(i));

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[size_t(top.left)];
    Symbol& r = symbols[size_t(top.right)];
    // Stale: one side was merged away or grew since the pair was queued.
    if (l.size == 0 || r.size == 0 || l.size + r.size != top.size || l.next != top.right) continue;
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = top.left;
    try_pair(l.prev, top.left);
    try_pair(top.left, l.next);
  }

  for (int i = 0; i >= 0; i = symbols[size_t(i)].next) {
    const Symbol& s = symbols[size_t(i)];
    const std::string piece(text.substr(s.offset, s.size));
    if (const auto it = piece_id.find(piece); it != piece_id.end()) {
      out.push_back(it->second);
      continue;
    }
    for (const char c : piece) {
      const int32_t byte_id = byte_token[uint8_t(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (unk) {
        out.push_back(*unk);
      } else {
        value_error("tokenizer: cannot encode byte " + std::to_string(int(uint8_t(c))) +
                    ": the vocabulary has neither its byte token nor an unknown token");
      }
    }
  }
}

void Tokenizer::Impl::encode_metaspace(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const uint32_t len = detail::decode_utf8(text, i).len;
    if (const auto it = id_of.find(std::string(text.substr(i, len))); it != id_of.end()) {
      ids.push_back(it->second);
    } else {
      // Every byte's token, or (when one is missing) the unknown token for the character.
      const std::string_view bytes = text.substr(i, len);
      const bool spelled = std::all_of(bytes.begin(), bytes.end(), [&](char c) { return byte_token[uint8_t(c)] >= 0; });
      if (spelled) {
        for (const char c : bytes) ids.push_back(byte_token[uint8_t(c)]);
      } else if (unk) {
        ids.push_back(*unk);
      } else {
        value_error("tokenizer: cannot encode a character of " + std::to_string(len) +
                    " bytes: the vocabulary has neither it, its byte tokens nor an unknown token");
      }
    }
    i += len;
  }
  merge_by_rank(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace iron::text
