// Modules hold weights and states by dotted path, like torch.nn.Module's state dict:
// `layers.3.attn.q` is the param `q` of child `attn` of the fourth of `layers`.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "iron/handle.hpp"
#include "iron/tensor.hpp"

namespace iron {

struct Resident;

/// Something a module holds that a body reads as a handle: a param, a weight table or a state.
class Held {
 public:
  Held() = default;
  explicit Held(std::shared_ptr<Resident> r) : resident_(std::move(r)) {}
  /// This tensor in the graph being recorded.
  Handle handle() const;
  operator Handle() const { return handle(); }  // NOLINT: used wherever a handle is
  Handle operator[](const Index& i) const { return handle()[i]; }
  Handle operator[](std::initializer_list<Index> i) const { return handle()[i]; }
  Handle operator[](const Handle& ids) const { return handle()[ids]; }
  const Shape& shape() const;
  DType dtype() const;
  const std::shared_ptr<Resident>& resident() const { return resident_; }
  /// The bound tensor of a param or weight table (states live on the device: read them through
  /// a compiled version).
  const Tensor& tensor() const;

 protected:
  std::shared_ptr<Resident> resident_;
};

/// A weight declared by shape, bound by Graph::load_state_dict.
class Param : public Held {
  using Held::Held;
};
/// A tensor the body indexes per call (`table[ids]`, a RoPE table row at `position`).
class Weight : public Held {
  using Held::Held;
};
/// Device-resident state shared by every version of a graph (a KV cache), zero at first.
class State : public Held {
  using Held::Held;
};

/// The dtype a param declared with `keep` takes from its checkpoint (quantised weights stay so).
inline constexpr DType keep_dtype = DType(0xff);

class Module {
 public:
  Module();
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Every param, weight and state held at any depth, with its dotted path (first path wins for
  /// one held at several).
  std::vector<std::pair<std::string, std::shared_ptr<Resident>>> held() const;

 protected:
  /// A param of `shape`; `dtype` keep_dtype keeps the checkpoint's (quantised) type.
  Param param(const std::string& name, const Shape& shape, DType dtype = f32);
  /// A param holding `value` already (not bound from a checkpoint).
  Param param(const std::string& name, const Tensor& value);
  /// The same param held at another path too (tied embeddings): it binds once.
  Param tie(const std::string& name, const Param& other);
  Weight weight(const std::string& name, const Tensor& table);
  State state(const std::string& name, const Shape& shape, DType dtype = f32);

  /// A child module at `name`, constructed in place (use as a member initializer).
  template <class T, class... Args>
  T child(const std::string& name, Args&&... args) {
    pending() = {this, name};
    return T(std::forward<Args>(args)...);
  }
  /// `count` children at `name.0`, `name.1`, ...
  template <class T, class... Args>
  std::vector<std::unique_ptr<T>> children(const std::string& name, int count, Args&&... args) {
    std::vector<std::unique_ptr<T>> out;
    for (int i = 0; i < count; ++i) {
      pending() = {this, name + "." + std::to_string(i)};
      out.push_back(std::make_unique<T>(args...));
    }
    return out;
  }

 private:
  friend class Graph;
  struct Pending {
    Module* parent = nullptr;
    std::string name;
  };
  static Pending& pending();
  void collect(const std::string& prefix,
               std::vector<std::pair<std::string, std::shared_ptr<Resident>>>& out,
               std::vector<std::pair<std::string, const Module*>>* modules) const;

  std::vector<std::pair<std::string, std::shared_ptr<Resident>>> own_;
  std::vector<std::pair<std::string, Module*>> children_;
};

}  // namespace iron
