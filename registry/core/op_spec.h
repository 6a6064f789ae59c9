// One [[op]] of a manifest as read (op_manifest.h reads it; manifest.h
// documents the syntax and holds the ops in Manifest::ops). Apart from
// manifest.h so that its reader need not include the whole manifest.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "output_spec.h"
#include "signature.h"

namespace kreg {

struct OpSpec {
  Signature signature;
  std::vector<std::string> dtypes;      // names from the dtype table (core/dtype.h)
  std::string launcher;                 // symbol prefix
  std::vector<std::string> same_shape;  // names of Tensor arguments
  std::string reference;                // function name in the reference module
  std::string baseline;                 // torch baseline in the reference module, or ""
  std::string backward;                 // name of the backward op, or ""
  std::vector<int32_t> arg_dtypes;      // per argument: a fixed dtype code, or -1
  std::vector<OutputSpec> outputs;      // one per return
  // Tensor argument -> its shape in named sizes ("rows", "cols") or integers.
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep;
  // The kernel's [tune] parameters this op's code reads (sorted): registry.tune
  // varies only these for it, the others stay at their defaults. Every
  // parameter unless the op's `tune` key lists fewer; empty without [tune].
  std::vector<std::string> tune_params;
};

}  // namespace kreg
