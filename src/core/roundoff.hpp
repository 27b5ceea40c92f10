// A dtype's unit roundoff: how far rounding once to it may move a value, relatively. A fact of
// the dtype alone, so it sits below every layer: the operators' tests allow it on top of an
// operator's tolerance, and so does the graph's check mode (graph/image.cpp), which must not
// reach into ops/ for it.
#pragma once

#include "iron/dtype.hpp"

namespace iron {

/// The unit roundoff of a dtype: what rounding once to it may change, relatively.
inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::bf16:
      return 1.0 / 256;
    case DType::f16:
      return 1.0 / 2048;
    default:
      return 1.2e-7;
  }
}

}  // namespace iron
