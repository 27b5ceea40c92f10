#include "iron/value.hpp"

#include <algorithm>
#include <sstream>

#include "graph/recording.hpp"
#include "iron/error.hpp"

namespace iron {

namespace {
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t apply(Affine::Op op, int64_t x, int64_t operand) {
  switch (op) {
    case Affine::Op::mul:
      return x * operand;
    case Affine::Op::add:
      return x + operand;
    case Affine::Op::floordiv:
      return floor_div(x, operand);
    case Affine::Op::shr:
      return x >> operand;
    case Affine::Op::min:
      return std::min(x, operand);
    case Affine::Op::max:
      return std::max(x, operand);
  }
  return x;
}
}  // namespace

Affine::Affine(int64_t constant) {
  if (constant != 0) steps_.push_back({Op::add, constant});
}

Affine::Affine(const PerCall& value) : slot_(value.slot), name_(value.name) {
  if (value.slot < 0) type_error("per-call value '" + value.name + "' is not declared by a graph");
  // A graph called inside another's body: its value is what the caller passed for it.
  if (Recorder* r = Recorder::current(); r && value.owner)
    if (const Affine* given = r->given(value)) *this = *given;
}

int64_t Affine::constant() const {
  if (!is_constant()) value_error("'" + str() + "' is a per-call value, not a constant");
  return eval(nullptr);
}

int64_t Affine::eval(const int64_t* values) const {
  int64_t x = slot_ < 0 ? 0 : values[slot_];
  for (const Step& s : steps_) x = apply(s.op, x, s.operand);
  return x;
}

std::pair<int64_t, int64_t> Affine::range(int64_t lo, int64_t hi) const {
  if (slot_ < 0) lo = hi = 0;
  for (const Step& s : steps_) {
    int64_t a = apply(s.op, lo, s.operand), b = apply(s.op, hi, s.operand);
    lo = std::min(a, b);
    hi = std::max(a, b);
  }
  return {lo, hi};
}

std::string Affine::str() const {
  std::string x = slot_ < 0 ? "0" : name_;
  for (const Step& s : steps_) {
    std::ostringstream o;
    const int64_t v = s.operand;
    switch (s.op) {
      case Op::add:
        if (x == "0")
          o << v;
        else
          o << "(" << x << (v < 0 ? " - " : " + ") << (v < 0 ? -v : v) << ")";
        break;
      case Op::mul:
      case Op::floordiv:
      case Op::shr:
        o << "(" << x << (s.op == Op::mul ? " * " : s.op == Op::shr ? " >> " : " // ") << v << ")";
        break;
      case Op::min:
      case Op::max:
        o << (s.op == Op::min ? "min(" : "max(") << x << ", " << v << ")";
        break;
    }
    x = o.str();
  }
  return x;
}

Affine Affine::then(Op op, int64_t operand) const {
  Affine out = *this;
  if ((op == Op::add && operand == 0) || (op == Op::mul && operand == 1)) return out;
  if (!out.steps_.empty() && out.steps_.back().op == op && (op == Op::add || op == Op::mul)) {
    // Fold (x + a) + b and (x * a) * b into one step.
    Step& last = out.steps_.back();
    last.operand = op == Op::add ? last.operand + operand : last.operand * operand;
    if ((op == Op::add && last.operand == 0) || (op == Op::mul && last.operand == 1))
      out.steps_.pop_back();
    return out;
  }
  out.steps_.push_back({op, operand});
  return out;
}

Affine Affine::clamp(std::optional<int64_t> lo, std::optional<int64_t> hi) const {
  if (lo && hi && *lo > *hi)
    value_error("clamp(" + str() + ", " + std::to_string(*lo) + ", " + std::to_string(*hi) +
                "): the low bound is above the high one");
  Affine out = *this;
  if (lo) out = out.then(Op::max, *lo);
  if (hi) out = out.then(Op::min, *hi);
  return out;
}

Affine operator+(const Affine& a, int64_t b) { return a.then(Affine::Op::add, b); }
Affine operator+(int64_t a, const Affine& b) { return b.then(Affine::Op::add, a); }
Affine operator-(const Affine& a, int64_t b) { return a.then(Affine::Op::add, -b); }
Affine operator*(const Affine& a, int64_t b) {
  if (a.is_constant()) return Affine(a.constant() * b);
  return a.then(Affine::Op::mul, b);
}
Affine operator*(int64_t a, const Affine& b) { return b * a; }
Affine operator/(const Affine& a, int64_t b) {
  if (b <= 0) value_error("a per-call value is divided by a positive constant, not " +
                          std::to_string(b));
  return b == 1 ? a : a.then(Affine::Op::floordiv, b);
}
Affine operator>>(const Affine& a, int b) {
  if (b < 0 || b > 62) value_error("shift of a per-call value by " + std::to_string(b));
  return b == 0 ? a : a.then(Affine::Op::shr, b);
}
Affine clamp(const Affine& x, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  return x.clamp(lo, hi);
}

}  // namespace iron
