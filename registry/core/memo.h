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
// v1/memo/<kernel>.<backend>.<8 hex of the manifest path>.toml, format 3
// (written by plan.h's record_outcome; the name keeps two checkouts sharing
// a cache apart):
//   format  = 3
//   kernel  = "axpy"
//   backend = "cpu"
//   env     = "<32 hex>"                  # digest of the env.* and toolchain.* key inputs
//   keys    = { device = "<hex>", lib = "<hex>" }   # lib always; then each artifact keyed
//                                         # apart from the plan (Outcome.apart): device, the cubin
//                                         # of device code with its own compiler
//   stamp_count = 4                       # how many [[stamp]] tables follow
//   input_count = 9                       # how many [inputs] entries follow
//   [[stamp]]                             # one table per file the keys depend on
//   path     = "/abs"
//   size     = 1
//   mtime_ns = 2
//   inode    = 3                          # as a signed 64-bit integer
//   xxh3     = "<32 hex>"
//   recorded_ns = 5                       # when the stat was taken (file_stamp.h: racy stamps)
//   [inputs]                              # the key inputs of keys.lib, for diffs
//   "file:axpy.cpp" = "<32 hex>"
// The memo is written without fsync (each edit writes it). A crash can leave
// it cut short; cut at a table boundary it would still parse, with fewer
// stamps, and vouch for a key without checking every file: the counts
// (format 2) make such a file unreadable instead. Format 1 had no counts;
// format 2 no recording time (a format 2 memo is not read: one re-hash).
// Binding keys are not kept: a binding's key follows from the signature and
// the environment, and is recomputed only when the binding is not loaded.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "file_stamp.h"
#include "key.h"

namespace kreg {

inline constexpr int kMemoFormat = 3;

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
