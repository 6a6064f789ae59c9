// The one place that includes toml++ for the cache's own files (entries and
// memos): small typed readers that throw std::runtime_error naming the field,
// and the helpers the hand-written TOML writers share.
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

// Parses `text`; throws std::runtime_error("<what>: <parse error> (line N)").
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

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);

}  // namespace kreg
