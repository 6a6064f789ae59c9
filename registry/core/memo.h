// The per-kernel memo: what the last successful build of a kernel depended on.
//
// It makes `get` with nothing changed cost a few stat() calls: if every stamp
// matches and the environment fingerprint is the same, the last keys still
// hold and nothing is hashed. When a stamp's stat differs the file is
// re-hashed (content decides). The stamps cover the manifest, the sources,
// the scanned include closure and the compiler's depfile list. The memo is
// one checkout's shortcut: losing it costs time, never correctness (the
// cache's dependency records, dep_record.h, make keys from content alone).
//
// memo/<kernel>.<backend>.toml, format 1:
//   format      = 1
//   kernel      = "axpy"
//   backend     = "cpu"
//   env         = "<32 hex>"           # digest of toolchain + versions
//   keys        = { lib = "<hex>", binding = "<hex>" }   # any named keys
//   [[stamp]]
//   path = "/abs"  size = 1  mtime_ns = 2  inode = 3  xxh3 = "<hex>"
//   [inputs]                            # the key inputs of keys.lib, for diffs
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "file_stamp.h"
#include "key.h"

namespace kreg {

inline constexpr int kMemoFormat = 1;

struct Memo {
  std::string kernel;
  std::string backend;
  std::string env;
  std::map<std::string, std::string> keys;
  std::vector<FileStamp> stamps;
  std::vector<KeyInput> inputs;
};

std::string memo_to_toml(const Memo& memo);
// nullopt for a missing file, garbage, or another format: the caller rebuilds
// the memo from scratch.
std::optional<Memo> read_memo(const std::string& path);
void write_memo(const std::string& path, const Memo& memo);

}  // namespace kreg
