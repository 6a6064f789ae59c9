#include "hash.h"

#include <cstdio>
#include <memory>
#include <new>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kreg {
namespace {

Digest from_xxh(const XXH128_hash_t& h) { return Digest{h.high64, h.low64}; }

XXH3_state_t* as_state(void* p) { return static_cast<XXH3_state_t*>(p); }

// Accepts only the lowercase digits hex() writes, so a digest has exactly one
// textual form (a cache file edited to uppercase is treated as foreign).
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<uint64_t> parse_word(std::string_view text) {
  uint64_t value = 0;
  for (char c : text) {
    int v = hex_value(c);
    if (v < 0) return std::nullopt;
    value = (value << 4) | static_cast<uint64_t>(v);
  }
  return value;
}

void append_word(uint64_t word, std::string* out) {
  static const char kDigits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out->push_back(kDigits[(word >> shift) & 0xf]);
}

}  // namespace

std::string Digest::hex() const {
  std::string out;
  out.reserve(32);
  append_word(high, &out);
  append_word(low, &out);
  return out;
}

std::optional<Digest> Digest::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  std::optional<uint64_t> high = parse_word(text.substr(0, 16));
  std::optional<uint64_t> low = parse_word(text.substr(16));
  if (!high || !low) return std::nullopt;
  return Digest{*high, *low};
}

Digest hash_bytes(std::string_view bytes) {
  return from_xxh(XXH3_128bits(bytes.data(), bytes.size()));
}

std::optional<Digest> hash_file(const std::string& path) {
  // stdio rather than ifstream: a directory opens fine on Linux and only fails
  // on read, which stdio reports through ferror instead of an exception.
  // Streamed: every cache lookup hashes its artifact (a binding is ~0.3 MB),
  // and XXH3's streaming digest equals the one-shot digest of the same bytes.
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return std::nullopt;
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) XXH3_128bits_update(&state, buffer, n);
  if (std::ferror(file.get())) return std::nullopt;
  return from_xxh(XXH3_128bits_digest(&state));
}

FieldHasher::FieldHasher() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(as_state(state_));
}

FieldHasher::~FieldHasher() { XXH3_freeState(as_state(state_)); }

FieldHasher& FieldHasher::field(std::string_view name, std::string_view value) {
  // <name> NUL <decimal length> NUL <value>: the length makes the value's end
  // unambiguous, and names cannot contain the NUL that ends them.
  const std::string length = std::to_string(value.size());
  const char nul = '\0';
  XXH3_state_t* state = as_state(state_);
  XXH3_128bits_update(state, name.data(), name.size());
  XXH3_128bits_update(state, &nul, 1);
  XXH3_128bits_update(state, length.data(), length.size());
  XXH3_128bits_update(state, &nul, 1);
  XXH3_128bits_update(state, value.data(), value.size());
  return *this;
}

Digest FieldHasher::digest() const { return from_xxh(XXH3_128bits_digest(as_state(state_))); }

std::string hash_fields_hex(const std::vector<std::pair<std::string, std::string>>& fields) {
  FieldHasher h;
  for (const auto& [name, value] : fields) h.field(name, value);
  return h.digest().hex();
}

}  // namespace kreg
