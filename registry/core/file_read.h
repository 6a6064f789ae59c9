// Reading a whole file: the one reader of the core (manifests, the include
// scan, the cache's entries, memos and dependency records, generated files).
// Hashing a file streams it instead (hash.h's hash_file).
#pragma once

#include <optional>
#include <string>

namespace kreg {

// The whole file, or nullopt when it cannot be opened or read (a directory
// opens on Linux and fails only on read: nullopt too).
std::optional<std::string> read_file(const std::string& path);

}  // namespace kreg
