#pragma once
#include "ops/op.hpp"
namespace iron::ops {
OpEntry copy_entry();
OpEntry gather_entry();
OpEntry transpose_entry();
}  // namespace iron::ops
