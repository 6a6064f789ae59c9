// C identifiers: names the manifest hands to generated C code (launcher,
// reference, module names) and to the preprocessor ([tune] parameters). Its
// own unit so that every reader of names (manifest.cc, tune_manifest.cc,
// codegen_aot.cc) can check them without including another's header.
#pragma once

#include <string>

namespace kreg {

// [A-Za-z_][A-Za-z0-9_]*: launcher, reference and module names reach C code.
bool is_c_identifier(const std::string& name);

}  // namespace kreg
