// SiLU: x * sigmoid(x), as torch's.
#include "ops/op.hpp"
#include "ops/unary.hpp"

namespace iron::ops {

namespace {
const Declaration kSiLU{"SiLU", nullptr, {{"elements", int64_t(0)}}, {}};

struct SiLU : UnaryOp {
  SiLU(Fields p, Fields t) : UnaryOp(kSiLU, std::move(p), std::move(t)) {}
  float apply(float x) const override { return float(double(x) / (1.0 + std::exp(-double(x)))); }
  Tolerance tolerance(Precision) const override { return {1e-6, 4e-6}; }
};
}  // namespace

OpEntry silu_entry() { return entry<SiLU>(kSiLU, {{cpu::Target::portable}}, IRON_VULKAN_RECORDER(record_unary)); }

}  // namespace iron::ops
