#include "toml_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace kreg {

void parse_toml_table(const std::string& text, const std::string& what, toml::table* out) {
  try {
    *out = toml::parse(text, what);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(what + ": " + std::string(e.description()) + " (line " +
                             std::to_string(e.source().begin.line) + ")");
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

std::optional<std::string> read_text_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);  // EISDIR lands here too
      return std::nullopt;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace kreg
