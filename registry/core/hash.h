// Content digests and the delimited field hasher behind every cache key.
//
// XXH3-128 is fast enough that hashing a kernel's whole include closure costs
// microseconds, and stable across processes and machines (unlike Python's
// salted hash()). Fields are written as typed, length-prefixed records so that
// ("-I", "-O2") and ("-I-O2") never hash alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kreg {

struct Digest {
  uint64_t high = 0;
  uint64_t low = 0;

  // 32 lowercase hex digits, high word first.
  std::string hex() const;
  // Parses the form hex() writes; nullopt for anything else.
  static std::optional<Digest> from_hex(std::string_view text);

  bool operator==(const Digest& other) const { return high == other.high && low == other.low; }
  bool operator!=(const Digest& other) const { return !(*this == other); }
};

Digest hash_bytes(std::string_view bytes);

// Digest of a file's bytes; nullopt when the file cannot be read.
std::optional<Digest> hash_file(const std::string& path);

// Streaming XXH3-128 over named fields. Each field is recorded as
//   <name> NUL <decimal length of value> NUL <value>
// so neither names nor values can run into each other.
class FieldHasher {
 public:
  FieldHasher();
  ~FieldHasher();
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;

  FieldHasher& field(std::string_view name, std::string_view value);
  Digest digest() const;

 private:
  void* state_;  // XXH3_state_t, kept opaque so xxhash.h stays out of this header
};

// The hex digest of named fields, in order (a FieldHasher over them).
std::string hash_fields_hex(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace kreg
