#pragma once
#include <vector>
#include "iron/operator.hpp"
namespace iron::ops {
/// Add, Sub, Mul and Div (each a subclass of Elementwise for profiles).
std::vector<CatalogEntry> elementwise_entries();
}  // namespace iron::ops
