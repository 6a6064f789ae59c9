// Limits of the launcher table's fixed arrays (registry/include/kreg/
// launcher_table.h, the one layout the core and the generated binding share).
// The manifest parser refuses an op beyond them, so no table can overflow.
#pragma once

#include "../include/kreg/launcher_table.h"

namespace kreg {

inline constexpr int kMaxArgs = KREG_TABLE_MAX_ARGS;            // arguments of one op
inline constexpr int kMaxOutputs = KREG_TABLE_MAX_OUTPUTS;      // returns of one op
inline constexpr int kMaxOutputDims = KREG_TABLE_MAX_OUTPUT_DIMS; // terms of one output's shape

}  // namespace kreg
