// The Unicode data of BERT's normaliser and pre-tokeniser (internal; generated tables in
// bert_tables.cpp, by scripts/gen_bert_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace iron::text::detail {

enum class BertClass : uint8_t { plain = 0, control = 1, punctuation = 2, mark = 3 };

/// One code point's replacement: up to 4 code points, the unused ones 0.
struct CodepointMapping {
  uint32_t cp;
  uint32_t to[4];
};

extern const uint32_t kBertClassRuns[];
extern const size_t kBertClassRunCount;
extern const CodepointMapping kDecompositions[];  // sorted by cp
extern const size_t kDecompositionCount;
extern const CodepointMapping kLowercase[];  // sorted by cp
extern const size_t kLowercaseCount;

}  // namespace iron::text::detail
