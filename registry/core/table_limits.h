// Limits of the launcher table's fixed arrays (launcher_table.h, and the
// table the generated binding reads: binding_text.cc). The manifest parser
// refuses an op beyond them, so no table can overflow.
#pragma once

namespace kreg {

inline constexpr int kMaxArgs = 32;      // arguments of one op
inline constexpr int kMaxOutputs = 8;    // returns of one op
inline constexpr int kMaxOutputDims = 8; // terms of one output's shape

}  // namespace kreg
