// The manifest's [tune] table and each [[op]]'s `tune` key, read into a
// ConfigSpace (config_space.h). manifest.h documents the syntax; this unit
// holds its reading and its checks, so the space's concept and the text that
// declares it sit together, apart from the rest of the manifest.
//
// It reads an already parsed table (the manifest's, parsed through the guard
// in toml_util.h) with the manifest's readers there, and throws their
// TomlFieldError naming the field; the manifest parser rethrows that as a
// ManifestError naming its file. It does not
// include manifest.h, which includes config_space.h and is included by the
// manifest parser that calls this: no include cycle.
#pragma once

#include <string>
#include <vector>

#include "config_space.h"
#include "toml_util.h"  // toml::table (toml_util.h says why it cannot be forward-declared), TomlFieldError

namespace kreg {

// The [tune] table of a manifest's root: its parameters (sorted by name, each
// default its `default` entry, else its first value) and rule. The default
// config must pass the rule, and the rule must evaluate for every config.
// Empty without a [tune] table. Throws TomlFieldError.
ConfigSpace parse_tune_table(const toml::table& root);

// An [[op]]'s tune = ["NAME", ...]: the parameters of `space` its code reads,
// sorted (the space's order); all of them without the key, none without a
// space. `op_field` names the op ("op[0]"). Throws TomlFieldError.
std::vector<std::string> parse_op_tune(const toml::table& op, const std::string& op_field,
                                       const ConfigSpace& space);

}  // namespace kreg
