// The catalog: every operator by name. Adding an operator adds its folder and one line here.
#include "ops/copy/copy.hpp"
#include "ops/elementwise/elementwise.hpp"
#include "ops/gemm/gemm.hpp"

namespace iron {

namespace ops {
CatalogEntry silu_entry();
CatalogEntry gelu_entry();
CatalogEntry rms_norm_entry();
CatalogEntry layer_norm_entry();
CatalogEntry rope_entry();
CatalogEntry softmax_entry();
CatalogEntry sample_entry();
CatalogEntry scalar_entry();
CatalogEntry emit_entry();
CatalogEntry attention_entry();
CatalogEntry segment_mean_entry();
CatalogEntry slot_rows_entry();
}  // namespace ops

const std::map<std::string, CatalogEntry, std::less<>>& catalog() {
  static const auto entries = [] {
    std::map<std::string, CatalogEntry, std::less<>> c;
    auto add = [&](const CatalogEntry& e) { c.emplace(e.declaration->name, e); };
    add(ops::copy_entry());
    add(ops::gather_entry());
    add(ops::transpose_entry());
    for (const auto& e : ops::elementwise_entries()) add(e);
    for (const auto& e : ops::matmul_entries()) add(e);
    add(ops::silu_entry());
    add(ops::gelu_entry());
    add(ops::rms_norm_entry());
    add(ops::layer_norm_entry());
    add(ops::rope_entry());
    add(ops::softmax_entry());
    add(ops::sample_entry());
    add(ops::scalar_entry());
    add(ops::emit_entry());
    add(ops::attention_entry());
    add(ops::segment_mean_entry());
    add(ops::slot_rows_entry());
    return c;
  }();
  return entries;
}

}  // namespace iron
