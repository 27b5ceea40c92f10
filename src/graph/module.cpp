#include "iron/module.hpp"

#include "graph/recording.hpp"
#include "iron/error.hpp"

namespace iron {

Handle Held::handle() const {
  if (!resident_) type_error("a param, weight or state used before it was declared");
  return Recorder::require(resident_->path + " used as a handle").resident(resident_);
}

const Shape& Held::shape() const { return resident_->shape; }
DType Held::dtype() const { return resident_->dtype; }
const Tensor& Held::tensor() const { return resident_->tensor; }

Module::Pending& Module::pending() {
  thread_local Pending p;
  return p;
}

Module::Module() {
  Pending& p = pending();
  if (p.parent) {
    p.parent->children_.emplace_back(p.name, this);
    p = {};
  }
}

namespace {
std::shared_ptr<Resident> make_resident(const std::string& name, const Shape& shape, DType dtype,
                                        bool is_state) {
  if (name.empty() || name.find('.') != std::string::npos)
    value_error("a held name is one non-empty path part, not '" + name + "'");
  auto r = std::make_shared<Resident>();
  r->path = name;
  r->shape = shape;
  r->dtype = dtype;
  r->is_state = is_state;
  element_count(shape);
  return r;
}
}  // namespace

Param Module::param(const std::string& name, const Shape& shape, DType dtype) {
  auto r = make_resident(name, shape, dtype, false);
  own_.emplace_back(name, r);
  return Param(r);
}

Param Module::param(const std::string& name, const Tensor& value) {
  auto r = make_resident(name, value.shape(), value.dtype(), false);
  r->bind(value);
  own_.emplace_back(name, r);
  return Param(r);
}

Param Module::tie(const std::string& name, const Param& other) {
  if (!other.resident()) value_error("tie('" + name + "') to an undeclared param");
  own_.emplace_back(name, other.resident());
  return other;
}

Weight Module::weight(const std::string& name, const Tensor& table) {
  auto r = make_resident(name, table.shape(), table.dtype(), false);
  r->bind(table);
  own_.emplace_back(name, r);
  return Weight(r);
}

State Module::state(const std::string& name, const Shape& shape, DType dtype) {
  auto r = make_resident(name, shape, dtype, true);
  own_.emplace_back(name, r);
  return State(r);
}

void Module::collect(const std::string& prefix,
                     std::vector<std::pair<std::string, std::shared_ptr<Resident>>>& out,
                     std::vector<std::pair<std::string, const Module*>>* modules) const {
  for (const auto& [name, r] : own_) out.emplace_back(prefix + name, r);
  for (const auto& [name, child] : children_) {
    if (modules) modules->emplace_back(prefix + name, child);
    child->collect(prefix + name + ".", out, modules);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Resident>>> Module::held() const {
  std::vector<std::pair<std::string, std::shared_ptr<Resident>>> every, first;
  collect("", every, nullptr);
  for (const auto& [path, r] : every) {
    bool seen = false;
    for (const auto& f : first) seen |= f.second == r;
    if (!seen) first.emplace_back(path, r);
  }
  return first;
}

}  // namespace iron
