#include "toml_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "closest_name.h"

namespace kreg {

namespace {

// ---- toml++ 3.3 guard -------------------------------------------------------
//
// toml++ 3.3's is_non_ascii_horizontal_whitespace() reaches
// __builtin_unreachable (undefined behaviour; marzer/tomlplusplus#190, found
// here by fuzzing) for some non-ASCII codepoints, and the parser asks it about
// any character where whitespace could appear: outside strings, in the text
// its error paths scan, and after a line-ending backslash in a multi-line
// string. So the text is first parsed with those codepoints replaced by
// U+FFFD (same validity, same line:column), and the real text is parsed only
// once it is known to be valid TOML, where the backslash case is the only one
// left.

// The codepoints that function has no answer for (checked exhaustively).
bool trips_whitespace_bug(char32_t c) {
  if (c <= 0xA0 || c >= 0xFEFF || c == 0x3000) return false;
  const uint32_t block = (c - 0xA0) / 0x3FA;
  return block == 0 || block == 11 || block == 63;
}

// Length of the 2- or 3-byte UTF-8 sequence at text[i] (0 if there is none),
// decoded into *c. Lenient about overlong forms on purpose: treating one as a
// codepoint only makes the replacement more conservative.
size_t decode_short_utf8(std::string_view text, size_t i, char32_t* c) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  auto continuation = [&](size_t k) { return k < text.size() && (byte(k) & 0xC0) == 0x80; };
  if ((byte(i) & 0xE0) == 0xC0 && continuation(i + 1)) {
    *c = (char32_t(byte(i) & 0x1F) << 6) | (byte(i + 1) & 0x3F);
    return 2;
  }
  if ((byte(i) & 0xF0) == 0xE0 && continuation(i + 1) && continuation(i + 2)) {
    *c = (char32_t(byte(i) & 0x0F) << 12) | (char32_t(byte(i + 1) & 0x3F) << 6) |
         (byte(i + 2) & 0x3F);
    return 3;
  }
  return 0;
}

// Past the whitespace toml++ skips after a line-ending backslash: ASCII
// blanks and line breaks, and the non-ASCII horizontal whitespace it accepts.
size_t skip_toml_whitespace(std::string_view text, size_t i) {
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
      continue;
    }
    char32_t cp = 0;
    const size_t length = decode_short_utf8(text, i, &cp);
    const bool blank = cp == 0xA0 || cp == 0x1680 || cp == 0x180E ||
                       (cp >= 0x2000 && cp <= 0x200B) || cp == 0x202F || cp == 0x205F ||
                       cp == 0x2060 || cp == 0x3000 || cp == 0xFEFF;
    if (length == 0 || !blank) break;
    i += length;
  }
  return i;
}

std::string replace_tripping_codepoints(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    const size_t length = decode_short_utf8(text, i, &c);
    if (length > 0 && trips_whitespace_bug(c)) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += length;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// In valid TOML: the offset of a tripping codepoint that is the first
// non-whitespace character after a backslash in a multi-line basic string, or
// npos. A plain scanner is exact here because the text is known to be valid.
size_t find_tripping_after_backslash(std::string_view text) {
  enum class State { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  auto at = [&](size_t i, std::string_view s) { return text.substr(i, s.size()) == s; };
  // A multi-line closing delimiter may carry up to two more quotes.
  auto skip_close = [&](size_t i, char quote) {
    i += 3;
    for (int extra = 0; extra < 2 && i < text.size() && text[i] == quote; ++extra) ++i;
    return i;
  };
  State state = State::kCode;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    switch (state) {
      case State::kCode:
        if (at(i, "\"\"\"") || at(i, "'''")) {
          state = c == '"' ? State::kMultiBasic : State::kMultiLiteral;
          i += 3;
          continue;
        }
        if (c == '#') state = State::kComment;
        if (c == '"') state = State::kBasic;
        if (c == '\'') state = State::kLiteral;
        ++i;
        break;
      case State::kComment:
        if (c == '\n') state = State::kCode;
        ++i;
        break;
      case State::kBasic:
        if (c == '"') state = State::kCode;
        i += c == '\\' ? 2 : 1;  // an escaped character never closes the string
        break;
      case State::kLiteral:
        if (c == '\'') state = State::kCode;
        ++i;
        break;
      case State::kMultiBasic:
        if (at(i, "\"\"\"")) {
          state = State::kCode;
          i = skip_close(i, '"');
        } else if (c == '\\') {
          const size_t after = skip_toml_whitespace(text, i + 1);
          if (after == i + 1) {
            i += 2;  // an ordinary escape such as \" or \\ .
            break;
          }
          // A line-ending backslash: toml++ tests what follows for whitespace.
          char32_t next = 0;
          if (after < text.size() && decode_short_utf8(text, after, &next) > 0 &&
              trips_whitespace_bug(next)) {
            return after;
          }
          i = after;
        } else {
          ++i;
        }
        break;
      case State::kMultiLiteral:
        if (at(i, "'''")) {
          state = State::kCode;
          i = skip_close(i, '\'');
        } else {
          ++i;
        }
        break;
    }
  }
  return std::string_view::npos;
}

// 1-based line and column (in characters, not bytes) of a byte offset.
std::pair<size_t, size_t> line_and_column(std::string_view text, size_t offset) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;  // UTF-8 continuation bytes belong to the previous character
    }
  }
  return {line, column};
}

std::optional<TomlProblem> parse_toml_unchecked(const std::string& text, const std::string& source,
                                                toml::table* out) {
  try {
    *out = toml::parse(text, source);
    return std::nullopt;
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    return TomlProblem{at.line, at.column, std::string(e.description()), false};
  }
}

}  // namespace

std::optional<TomlProblem> parse_toml_guarded(const std::string& text, const std::string& source,
                                              toml::table* out) {
  // See "toml++ 3.3 guard" above for why valid text is parsed twice.
  const std::string safe = replace_tripping_codepoints(text);
  if (std::optional<TomlProblem> problem = parse_toml_unchecked(safe, source, out)) return problem;
  if (safe == text) return std::nullopt;
  const size_t at = find_tripping_after_backslash(text);
  if (at != std::string_view::npos) {
    const auto [line, column] = line_and_column(text, at);
    return TomlProblem{line, column,
                       "the TOML reader cannot handle this character right after a line-ending "
                       "backslash; start the line with an ASCII character",
                       true};
  }
  return parse_toml_unchecked(text, source, out);
}

const char* toml_type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

void parse_toml_table(const std::string& text, const std::string& what, toml::table* out) {
  if (std::optional<TomlProblem> problem = parse_toml_guarded(text, what, out)) {
    throw std::runtime_error(what + ": " + problem->message + " (line " + std::to_string(problem->line) + ")");
  }
}

namespace {

const toml::node& require(const toml::table& t, const char* field) {
  const toml::node* node = t.get(field);
  if (node == nullptr) throw std::runtime_error(std::string("missing field '") + field + "'");
  return *node;
}

std::runtime_error wrong_type(const char* field, const char* expected) {
  return std::runtime_error(std::string("field '") + field + "' must be " + expected);
}

}  // namespace

std::string get_string(const toml::table& t, const char* field) {
  const toml::node& node = require(t, field);
  if (!node.is_string()) throw wrong_type(field, "a string");
  return node.as_string()->get();
}

int64_t get_int(const toml::table& t, const char* field) {
  const toml::node& node = require(t, field);
  if (!node.is_integer()) throw wrong_type(field, "an integer");
  return node.as_integer()->get();
}

double get_double(const toml::table& t, const char* field) {
  const toml::node& node = require(t, field);
  if (node.is_floating_point()) return node.as_floating_point()->get();
  if (node.is_integer()) return static_cast<double>(node.as_integer()->get());
  throw wrong_type(field, "a number");
}

std::vector<std::string> get_string_array(const toml::table& t, const char* field) {
  const toml::node& node = require(t, field);
  const toml::array* array = node.as_array();
  if (array == nullptr) throw wrong_type(field, "an array of strings");
  std::vector<std::string> out;
  out.reserve(array->size());
  for (const toml::node& item : *array) {
    if (!item.is_string()) throw wrong_type(field, "an array of strings");
    out.push_back(item.as_string()->get());
  }
  return out;
}

std::vector<KeyInput> get_inputs(const toml::table& t, const char* field) {
  const toml::node* node = t.get(field);
  if (node == nullptr) return {};
  const toml::table* table = node->as_table();
  if (table == nullptr) throw wrong_type(field, "a table of strings");
  std::vector<KeyInput> out;
  for (const auto& [name, value] : *table) {
    if (!value.is_string()) throw wrong_type(field, "a table of strings");
    out.push_back({std::string(name.str()), value.as_string()->get()});
  }
  // toml::table is ordered by key already; sort anyway so the contract does
  // not depend on that detail.
  std::sort(out.begin(), out.end(),
            [](const KeyInput& a, const KeyInput& b) { return a.name < b.name; });
  return out;
}

TomlFieldError::TomlFieldError(std::string field, const std::string& message)
    : std::runtime_error(message), field_(std::move(field)) {}

void fail_field(const std::string& field, const std::string& message) { throw TomlFieldError(field, message); }

void fail_wrong_type(const std::string& field, const char* expected, const toml::node& node) {
  fail_field(field, std::string("expected ") + expected + ", got " + toml_type_name(node.type()));
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

std::string dotted(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string indexed(const std::string& field, size_t i) { return field + "[" + std::to_string(i) + "]"; }

std::string read_string(const toml::node& node, const std::string& field) {
  const toml::value<std::string>* value = node.as_string();
  if (value == nullptr) fail_wrong_type(field, "a string", node);
  const std::string& s = value->get();
  // NUL would silently truncate paths and merge flags joined with NUL.
  if (s.find('\0') != std::string::npos) fail_field(field, "contains a NUL character");
  return s;
}

std::vector<std::string> read_string_list(const toml::node& node, const std::string& field) {
  const toml::array* array = node.as_array();
  if (array == nullptr) fail_wrong_type(field, "an array of strings", node);
  std::vector<std::string> out;
  for (size_t i = 0; i < array->size(); ++i) out.push_back(read_string((*array)[i], indexed(field, i)));
  return out;
}

const toml::table& read_table(const toml::node& node, const std::string& field) {
  const toml::table* table = node.as_table();
  if (table == nullptr) fail_wrong_type(field, "a table", node);
  return *table;
}

void check_keys(const toml::table& table, const std::string& prefix, const std::vector<std::string>& allowed,
                const std::map<std::string, std::string>& aliases) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    std::string suggestion;
    auto alias = aliases.find(name);
    if (alias != aliases.end() && std::find(allowed.begin(), allowed.end(), alias->second) != allowed.end()) {
      suggestion = alias->second;
    } else {
      suggestion = closest_name(name, allowed);
    }
    std::string message = "unknown key " + in_quotes(name);
    if (!suggestion.empty()) {
      message += " (did you mean " + in_quotes(suggestion) + "?)";
    } else {
      std::string expected;
      for (const std::string& k : allowed) expected += (expected.empty() ? "" : ", ") + k;
      message += "; expected one of " + expected;
    }
    fail_field(dotted(prefix, name), message);
  }
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not
// one (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static const uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::string toml_quote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
      ++i;
      continue;
    }
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      // TOML text must be UTF-8 and has no byte escapes. A stray byte (say, a
      // Latin-1 file name) becomes U+FFFD: lossy, but the file stays readable,
      // and these strings are informational or simply fail to match later.
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  out += '"';
  return out;
}

std::string toml_double(double value) {
  if (value != value) return "nan";
  if (value == std::numeric_limits<double>::infinity()) return "inf";
  if (value == -std::numeric_limits<double>::infinity()) return "-inf";
  char buf[64];
  // Shortest text that reads back as the same double.
  auto result = std::to_chars(buf, buf + sizeof buf, value);
  std::string out(buf, result.ptr);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace kreg
