// A manifest's [[op]] tables, read into OpSpecs: each op's signature,
// dtypes, launcher, same_shape, reference, outputs, arg_dtypes, sweep and
// backward (manifest.h documents the syntax). This unit holds their reading
// and checks, apart from the manifest's structure and paths, as
// tune_manifest.h holds [tune].
//
// It reads an already parsed table with the manifest's readers
// (toml_util.h) and throws their TomlFieldError naming the field
// ("op[1].outputs.mean"); the manifest parser rethrows that as a
// ManifestError naming its file. Each op's `tune` key is read after, by
// tune_manifest.h, against the [tune] table.
// Tested through parse_manifest, as a user meets it: manifest_test.cc's
// ManifestOpsTest.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "op_spec.h"
#include "toml_util.h"  // toml::table (toml_util.h says why it cannot be forward-declared), TomlFieldError

namespace kreg {

// The root's [[op]] array: at least one op, names unique, each backward an
// op of the same kernel whose arguments and returns match its forward's.
// `key_aliases`: the manifest's other spellings of keys ("dtype" for
// "dtypes"), for the unknown-key message. Throws TomlFieldError.
std::vector<OpSpec> parse_op_tables(const toml::table& root,
                                    const std::map<std::string, std::string>& key_aliases);

}  // namespace kreg
