// IRON: operators, and graphs over them. The one header to include.
#pragma once

#include "iron/carried_loop.hpp"
#include "iron/dtype.hpp"
#include "iron/error.hpp"
#include "iron/functional.hpp"
#include "iron/graph.hpp"
#include "iron/handle.hpp"
#include "iron/log.hpp"
#include "iron/module.hpp"
#include "iron/operator.hpp"
#include "iron/precision.hpp"
#include "iron/profile.hpp"
#include "iron/tensor.hpp"
#include "iron/value.hpp"
