// Per-call values: small integers the host writes each call (Scratchpad) or a graph computes for
// its next call (Carried), and the integer expressions of them (Affine) that kernels read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace iron {

/// Per-call values are at most 30 bits: 0 <= v < 2^30 (what an NPU descriptor field holds).
inline constexpr int64_t kValueLimit = int64_t(1) << 30;

enum class ValueKind : uint8_t { scratchpad, carried };

/// One per-call value a graph declares: its name and its slot in the graph's value table.
struct PerCall {
  std::string name;
  int slot = -1;
  ValueKind kind = ValueKind::scratchpad;
  /// The graph that declares it: when that graph is called inside another's body, its values
  /// stand for what the caller gave (Graph::operator()).
  const void* owner = nullptr;
};

/// An integer expression of at most one per-call value: start from the value (or 0), then apply
/// each step in order (multiply, add, floor-divide, shift right, clamp). Evaluated when a call's
/// words are written, never by kernels.
class Affine {
 public:
  enum class Op : uint8_t { mul, add, floordiv, shr, min, max };
  struct Step {
    Op op;
    int64_t operand;
    bool operator==(const Step&) const = default;
  };

  Affine(int64_t constant = 0);  // NOLINT: a constant is an Affine
  Affine(const PerCall& value);  // NOLINT: a value is an Affine

  bool is_constant() const { return slot_ < 0; }
  /// The value when constant; throws otherwise.
  int64_t constant() const;
  int slot() const { return slot_; }
  const std::string& value_name() const { return name_; }
  const std::vector<Step>& steps() const { return steps_; }

  /// Evaluates with `values[slot]` the value's word.
  int64_t eval(const int64_t* values) const;
  /// The least and greatest this can be for a value in [lo, hi] (steps are monotone).
  std::pair<int64_t, int64_t> range(int64_t lo, int64_t hi) const;
  std::string str() const;

  Affine then(Op op, int64_t operand) const;
  /// Held to [lo, hi]; a bound left out is none.
  Affine clamp(std::optional<int64_t> lo, std::optional<int64_t> hi) const;

  bool operator==(const Affine& other) const {
    return slot_ == other.slot_ && steps_ == other.steps_;
  }

 private:
  int slot_ = -1;
  std::string name_;
  std::vector<Step> steps_;
};

Affine operator+(const Affine& a, int64_t b);
Affine operator+(int64_t a, const Affine& b);
Affine operator-(const Affine& a, int64_t b);
Affine operator*(const Affine& a, int64_t b);
Affine operator*(int64_t a, const Affine& b);
/// Floor division by a positive constant.
Affine operator/(const Affine& a, int64_t b);
Affine operator>>(const Affine& a, int b);
/// A value's expression held to [lo, hi], as `iron::clamp(position, 0, limit)`.
Affine clamp(const Affine& x, std::optional<int64_t> lo, std::optional<int64_t> hi);

/// A per-call value the host writes each call.
struct Scratchpad : PerCall {
  operator Affine() const { return Affine(static_cast<const PerCall&>(*this)); }  // NOLINT
};
/// A per-call value the graph computes for its next call (returned with iron::carry); the host
/// seeds only the first call.
struct Carried : PerCall {
  operator Affine() const { return Affine(static_cast<const PerCall&>(*this)); }  // NOLINT
};

}  // namespace iron
