// The one place that includes toml++: the guarded parse every TOML read uses
// (manifests and the cache's own files), small typed readers that throw
// std::runtime_error naming the field, the manifest's typed readers that throw
// TomlFieldError, and the helpers the hand-written TOML writers share.
//
// toml++ is included here directly (not forward-declared) because it nests its
// classes in inline ABI namespaces that a forward declaration cannot track.
// It is slow to compile, so only the .cc files that read TOML include this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "key.h"

namespace kreg {

// Why a text was not read: where (1-based line and column, in characters)
// and what.
struct TomlProblem {
  size_t line = 0;
  size_t column = 0;
  std::string message;
  bool unsupported = false;  // valid TOML that toml++ 3.3 cannot read safely (toml_util.cc)
};

// Every TOML read of the core goes through here: toml++ 3.3 has undefined
// behaviour on some non-ASCII codepoints (toml_util.cc, "toml++ 3.3 guard"),
// so the text is first parsed with them replaced. Parses `text` (named
// `source` in toml++'s errors) into *out; nullopt, or why not.
std::optional<TomlProblem> parse_toml_guarded(const std::string& text, const std::string& source,
                                              toml::table* out);

// A node's type as messages name it: "a table", "an integer", ... ("nothing"
// for none), so every reader's "expected X, got Y" reads alike.
const char* toml_type_name(toml::node_type type);

// The cache's own files: parse_toml_guarded, a problem thrown as
// std::runtime_error("<what>: <problem> (line N)").
void parse_toml_table(const std::string& text, const std::string& what, toml::table* out);

// Typed field readers. Each throws std::runtime_error naming the field when it
// is missing or has the wrong type.
std::string get_string(const toml::table& t, const char* field);
int64_t get_int(const toml::table& t, const char* field);
double get_double(const toml::table& t, const char* field);  // integers accepted
std::vector<std::string> get_string_array(const toml::table& t, const char* field);
// A table of string values (name = value), sorted by name. An absent table
// reads as empty, since a writer may leave out an empty [inputs].
std::vector<KeyInput> get_inputs(const toml::table& t, const char* field);

// ---- the manifest's readers ------------------------------------------------
//
// kernel.toml is read by two units (manifest.cc, and tune_manifest.cc for its
// [tune] table); both name a problem by its field and word it alike, so the
// readers and their messages live here once. They know no file: the manifest
// parser turns a TomlFieldError into the ManifestError that names its file.

// What is wrong, at which field: the dotted path a ManifestError names
// ("cuda.sources[1]", "tune.params.ROWS"); what() is the message alone.
class TomlFieldError : public std::runtime_error {
 public:
  TomlFieldError(std::string field, const std::string& message);
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

[[noreturn]] void fail_field(const std::string& field, const std::string& message);

// "expected <expected>, got <the node's type>" at `field`.
[[noreturn]] void fail_wrong_type(const std::string& field, const char* expected, const toml::node& node);

// How messages write names and field paths: a name in double quotes,
// "op[0].dtypes" (just "dtypes" under an empty prefix), "cuda.sources[1]".
std::string in_quotes(const std::string& s);
std::string dotted(const std::string& prefix, const std::string& key);
std::string indexed(const std::string& field, size_t i);

// A string without NUL; an array of them (an item's errors name it
// "field[i]"); a table. Each throws TomlFieldError naming `field`.
std::string read_string(const toml::node& node, const std::string& field);
std::vector<std::string> read_string_list(const toml::node& node, const std::string& field);
const toml::table& read_table(const toml::node& node, const std::string& field);

// Unknown keys are errors (a typo must not silently drop a setting): throws
// TomlFieldError at "<prefix>.<key>" for the first key of `table` not in
// `allowed`, suggesting the key `aliases` maps it to (when that one is
// allowed), else the closest allowed name, else listing them all in order.
void check_keys(const toml::table& table, const std::string& prefix, const std::vector<std::string>& allowed,
                const std::map<std::string, std::string>& aliases = {});

// TOML basic-string quoting of arbitrary bytes (NUL and controls escaped).
// Also a valid quoted key.
std::string toml_quote(const std::string& s);

// A TOML float literal that reads back as exactly `value` (always has a '.'
// or an exponent, so it stays a float).
std::string toml_double(double value);

}  // namespace kreg
