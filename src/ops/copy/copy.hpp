#pragma once
#include "iron/operator.hpp"
namespace iron::ops {
CatalogEntry copy_entry();
CatalogEntry gather_entry();
CatalogEntry transpose_entry();
}  // namespace iron::ops
