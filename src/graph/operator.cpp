#include "iron/operator.hpp"

#include <cmath>
#include <sstream>

#include "iron/error.hpp"

namespace iron {

std::string to_string(const FieldValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return "'" + x + "'";
        else if constexpr (std::is_same_v<T, double>) {
          std::ostringstream o;
          o << x;
          return o.str();
        } else
          return std::to_string(x);
      },
      v);
}

Fields::Fields(std::initializer_list<std::pair<const std::string, FieldValue>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

void Fields::set(const std::string& name, FieldValue value) {
  for (auto& [k, v] : items_)
    if (k == name) {
      v = std::move(value);
      return;
    }
  items_.emplace_back(name, std::move(value));
}

const FieldValue* Fields::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

namespace {
const FieldValue& require(const Fields& f, std::string_view name) {
  const FieldValue* v = f.find(name);
  if (!v) value_error("no field '" + std::string(name) + "' in " + f.str());
  return *v;
}
}  // namespace

int64_t Fields::integer(std::string_view name) const {
  const FieldValue& v = require(*this, name);
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  value_error("field '" + std::string(name) + "' is " + to_string(v) + ", not an integer");
}

double Fields::number(std::string_view name) const {
  const FieldValue& v = require(*this, name);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  value_error("field '" + std::string(name) + "' is " + to_string(v) + ", not a number");
}

bool Fields::flag(std::string_view name) const {
  const FieldValue& v = require(*this, name);
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  value_error("field '" + std::string(name) + "' is " + to_string(v) + ", not a flag");
}

const std::string& Fields::text(std::string_view name) const {
  const FieldValue& v = require(*this, name);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  value_error("field '" + std::string(name) + "' is " + to_string(v) + ", not a name");
}

std::string Fields::str() const {
  std::string s = "{";
  for (const auto& [k, v] : items_) s += (s.size() > 1 ? ", " : "") + k + "=" + to_string(v);
  return s + "}";
}

bool Declaration::is_a(const Declaration& other) const {
  for (const Declaration* d = this; d; d = d->base)
    if (d == &other) return true;
  return false;
}

const FieldDecl* Declaration::param(std::string_view n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const FieldDecl* Declaration::tunable(std::string_view n) const {
  for (const auto& t : tunables)
    if (t.name == n) return &t;
  return nullptr;
}

Operator::Operator(const Declaration& declaration, Fields params, Fields tunables)
    : declaration_(&declaration), params_(std::move(params)), tunables_(std::move(tunables)) {
  complete_fields(declaration, params_, tunables_);
}

std::string Operator::str() const { return name() + params_.str(); }

Tolerance Operator::tolerance(Precision) const { return {1e-5, 1e-5}; }

void complete_fields(const Declaration& d, Fields& params, Fields& tunables) {
  std::vector<std::string> unknown, missing;
  for (const auto& [k, v] : params.items())
    if (!d.param(k)) unknown.push_back(k);
  for (const auto& [k, v] : tunables.items())
    if (!d.tunable(k)) unknown.push_back(k);
  Fields full_params, full_tunables;
  for (const FieldDecl& p : d.params) {
    if (const FieldValue* v = params.find(p.name))
      full_params.set(p.name, *v);
    else if (p.default_value)
      full_params.set(p.name, *p.default_value);
    else
      missing.push_back(p.name);
  }
  for (const FieldDecl& t : d.tunables) {
    if (const FieldValue* v = tunables.find(t.name))
      full_tunables.set(t.name, *v);
    else if (t.default_value)
      full_tunables.set(t.name, *t.default_value);
  }
  if (!unknown.empty() || !missing.empty()) {
    std::string m = d.name + ":";
    if (!unknown.empty()) {
      m += " declares no field";
      for (const auto& u : unknown) m += " '" + u + "'";
    }
    if (!missing.empty()) {
      m += std::string(unknown.empty() ? "" : ";") + " needs";
      for (const auto& u : missing) m += " '" + u + "'";
    }
    value_error(m);
  }
  params = std::move(full_params);
  tunables = std::move(full_tunables);
}

const CatalogEntry& catalog_entry(std::string_view name) {
  const auto& c = catalog();
  auto it = c.find(name);
  if (it == c.end()) {
    std::string known;
    for (const auto& [k, v] : c) known += (known.empty() ? "" : ", ") + k;
    value_error("no operator '" + std::string(name) + "' in the catalog (known: " + known + ")");
  }
  return it->second;
}

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(x));
    case DType::f16:
      return f16_to_f32(f32_to_f16(x));
    case DType::i32:
    case DType::i8:
      return std::trunc(x);
    default:
      return x;
  }
}

std::string_view name(Precision p) {
  switch (p) {
    case Precision::highest: return "highest";
    case Precision::high: return "high";
    case Precision::medium: return "medium";
  }
  return "?";
}

Precision precision_from_name(std::string_view n) {
  if (n == "highest") return Precision::highest;
  if (n == "high") return Precision::high;
  if (n == "medium") return Precision::medium;
  value_error("unknown precision '" + std::string(n) + "' (highest, high or medium)");
}

bool Tolerance::admits(double out, double ref) const {
  if (std::isnan(ref)) return std::isnan(out);
  if (std::isinf(ref)) return out == ref;
  return std::abs(out - ref) <= atol + rtol * std::abs(ref);
}

}  // namespace iron
