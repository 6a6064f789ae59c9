// The one place that includes toml++: the guarded parse every TOML read uses
// (manifests and the cache's own files), small typed readers that throw
// std::runtime_error naming the field, and the helpers the hand-written TOML
// writers share.
//
// toml++ is included here directly (not forward-declared) because it nests its
// classes in inline ABI namespaces that a forward declaration cannot track.
// It is slow to compile, so only the .cc files that read TOML include this.
#pragma once

#include <cstdint>
#include <optional>
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

// TOML basic-string quoting of arbitrary bytes (NUL and controls escaped).
// Also a valid quoted key.
std::string toml_quote(const std::string& s);

// A TOML float literal that reads back as exactly `value` (always has a '.'
// or an exponent, so it stays a float).
std::string toml_double(double value);

}  // namespace kreg
