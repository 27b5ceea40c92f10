// An operator: one declaration (params, tunables), a reference and a tolerance; its kernels are
// registered with each device's table by its folder (src/ops/<op>/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "iron/dtype.hpp"
#include "iron/precision.hpp"
#include "iron/tensor.hpp"

namespace iron {

/// The value of a param or tunable: an integer, a float, a flag or a name.
using FieldValue = std::variant<int64_t, double, bool, std::string>;
std::string to_string(const FieldValue& v);

/// Named values in declaration order.
class Fields {
 public:
  Fields() = default;
  Fields(std::initializer_list<std::pair<const std::string, FieldValue>> items);
  void set(const std::string& name, FieldValue value);
  const FieldValue* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  bool flag(std::string_view name) const;
  const std::string& text(std::string_view name) const;
  const std::vector<std::pair<std::string, FieldValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  std::string str() const;
  bool operator==(const Fields&) const = default;

 private:
  std::vector<std::pair<std::string, FieldValue>> items_;
};

struct FieldDecl {
  std::string name;
  std::optional<FieldValue> default_value;  // none: the caller must give it
  /// For a tunable: the values `iron tune` tries (none: it is not tuned).
  std::vector<FieldValue> candidates = {};
};

/// What an operator class declares: its name in the catalog, its base (a subclass matches its
/// base's profile entries), its params (dimensions and flags that select behaviour) and its
/// tunables (choices that change speed, never meaning).
struct Declaration {
  std::string name;
  const Declaration* base = nullptr;
  std::vector<FieldDecl> params;
  std::vector<FieldDecl> tunables;

  bool is_a(const Declaration& other) const;
  const FieldDecl* param(std::string_view n) const;
  const FieldDecl* tunable(std::string_view n) const;
};

/// A dense operand as a reference sees it: f32 values (already rounded to `dtype`), its shape,
/// and how many leading entries of each axis are valid this call.
struct RefOperand {
  float* data = nullptr;
  Shape shape;
  Shape valid;
  DType dtype = f32;
  /// For Copy and Gather only: element strides of a strided view, and gathered rows.
  Shape strides;
  const std::vector<int64_t>* rows = nullptr;
  /// With `rows`: the rows of the table they index (a row outside it reads zeros or writes
  /// nothing); 0 where the caller checked every row (the graph's reference does).
  int64_t table_rows = 0;
};

/// One step's reference call: operands and the per-call scalars the step reads.
struct RefCall {
  std::vector<RefOperand> in;
  std::vector<RefOperand> out;
  std::vector<int64_t> scalars;
};

class Operator {
 public:
  Operator(const Declaration& declaration, Fields params, Fields tunables);
  virtual ~Operator() = default;

  const Declaration& declaration() const { return *declaration_; }
  const std::string& name() const { return declaration_->name; }
  const Fields& params() const { return params_; }
  const Fields& tunables() const { return tunables_; }
  std::string str() const;

  /// Plain loops in f32 or wider, each output rounded once to its dtype.
  virtual void reference(const RefCall& call) const = 0;
  /// The contract this operator's kernels meet at `precision`. The kernels themselves are the
  /// devices': each device's table lists them by operator (src/devices/cpu/kernel_table.hpp).
  virtual Tolerance tolerance(Precision precision) const;

 protected:
  const Declaration* declaration_;
  Fields params_;
  Fields tunables_;
};

/// Builds an operator of a declared class from its params and tunables (missing ones defaulted).
using OperatorFactory = std::function<std::shared_ptr<Operator>(Fields params, Fields tunables)>;

struct CatalogEntry {
  const Declaration* declaration;
  OperatorFactory make;
};

/// Every operator by name, for profiles and tools.
const std::map<std::string, CatalogEntry, std::less<>>& catalog();
const CatalogEntry& catalog_entry(std::string_view name);

/// Fills defaults, refuses unknown fields and missing required ones (naming them all).
void complete_fields(const Declaration& d, Fields& params, Fields& tunables);

/// Rounds `x` to what `dtype` can hold (for references: "rounded once").
float round_to(DType dtype, float x);

}  // namespace iron
