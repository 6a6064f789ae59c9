// Writing a file so that readers see the old content or the new, never a
// part: a temporary file in the same folder, then a rename (ccache's
// AtomicFile). Used for every file the core writes in place: memos,
// dependency records, toolchain memos, generated sources, and what Python
// writes through _core.write_file_atomic. A cache entry's folder is published
// by a rename of its own (cache_store.h).
#pragma once

#include <string>

namespace kreg {

// kDurable: fsync the file before the rename and the folder after, so the
// new content survives a crash whole. kUnsynced: no fsync, for records whose
// reader rejects a file cut short (the memo, the dependency records): after a
// crash such a file may be old, new, empty or cut short, never wrong.
enum class Sync { kDurable, kUnsynced };

// Writes `contents` to `path` through a temporary file in the same folder and
// a rename, so readers never see a partial file while the machine runs.
// Throws std::runtime_error naming the path and the failing step.
void write_file_atomic(const std::string& path, const std::string& contents,
                       Sync sync = Sync::kDurable);

}  // namespace kreg
