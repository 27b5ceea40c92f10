// Unicode NFC (canonical decomposition, then canonical composition: UAX #15) for tokenizers whose
// tokenizer.json normalises so (Qwen2's). Internal; the tables are scripts/gen_nfc_tables.py's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iron::text::detail {

struct NfcDecomposition {
  uint32_t cp, offset, length;  // kNfcDecompositionData[offset, offset + length): the full decomposition
};
struct NfcComposition {
  uint32_t first, second, composite;
};

extern const uint32_t kNfcCombiningClasses[];  // (code point << 8) | class, class > 0, sorted
extern const size_t kNfcCombiningClassesCount;
extern const NfcDecomposition kNfcDecompositions[];  // sorted by cp
extern const size_t kNfcDecompositionsCount;
extern const uint32_t kNfcDecompositionData[];
extern const size_t kNfcDecompositionDataCount;
extern const NfcComposition kNfcCompositions[];  // sorted by (first, second)
extern const size_t kNfcCompositionsCount;

/// The canonical combining class of a code point (0 for starters).
uint8_t combining_class(uint32_t cp);

/// `text` in NFC. Bytes that are not UTF-8 are kept as they are and end a run: each run of valid
/// characters between them is normalised on its own. ASCII comes back unchanged without work.
std::string nfc(std::string_view text);

}  // namespace iron::text::detail
