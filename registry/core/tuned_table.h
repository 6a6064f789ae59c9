// The tuned table: which config of a kernel's [tune] space (config_space.h)
// won, per (op, dtype, shape bucket, device arch), for one version of the
// kernel. registry.tune writes it; a later get reads it and dispatches each
// call to the winner of its shape bucket.
//
// One file per kernel version, named by the content key of the kernel
// library the default config builds (the "kernel key"):
//   <cache>/v1/tuned/<kernel>.<backend>.<16 hex of the kernel key>.table
// An edit to the kernel gives a new key, so its table is simply not there:
// the other tables of the kernel say it was tuned before (stale), and get
// runs the default config until it is tuned again. Going back to the old
// code finds the old table.
//
// Format (text, one record a line, fields separated by one space; version 1):
//   kreg-tuned-table 1
//   kernel softmax
//   backend cuda
//   key <the kernel key, hex>
//   win <op> <dtype> <bucket> <arch> <config> <seconds> <default seconds>
//     op, dtype:  the manifest's op name and dtype name
//     bucket:     shape_bucket() of the op's first Tensor argument, e.g. 4096x256
//     arch:       the device it was timed on, e.g. sm_90, or "cpu"
//     config:     config_label(), e.g. ROWS=2,THREADS=256
//     seconds:    the winner's median time; default seconds: the default config's
// One `win` line per (op, dtype, bucket, arch): a later line replaces an earlier one.
// A file of another version, or one that does not parse, reads as no table
// (tune again), never as an error in get. Written atomically (write_file_atomic).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kreg {

inline constexpr int kTunedTableFormat = 1;

struct TunedWin {
  std::string op, dtype, bucket, arch, config;
  double seconds = 0, default_seconds = 0;
};

struct TunedTable {
  std::string kernel, backend, key;
  std::vector<TunedWin> wins;
  // Adds or replaces the win of (op, dtype, bucket, arch).
  void put(const TunedWin& win);
};

// <tuned dir>/<kernel>.<backend>.<key[:16]>.table
std::string tuned_table_path(const std::string& tuned_dir, const std::string& kernel, const std::string& backend,
                             const std::string& key_hex);
std::string format_tuned_table(const TunedTable& table);
// nullopt: another version, or damaged text.
std::optional<TunedTable> parse_tuned_table(const std::string& text);
std::optional<TunedTable> read_tuned_table(const std::string& path);
// Atomic: readers see the old table or the new one.
void write_tuned_table(const std::string& path, const TunedTable& table);
// The keys of the kernel's other tables in `tuned_dir` (newest first): a
// table exists, but for other code.
std::vector<std::string> other_tuned_keys(const std::string& tuned_dir, const std::string& kernel,
                                          const std::string& backend, const std::string& key_hex);

// A shape's bucket: every dimension rounded up to a power of two ("4096x256";
// 0 stays 0; a 0-d tensor is "scalar"). Shapes of one bucket share a winner.
std::string shape_bucket(const std::vector<int64_t>& shape);

}  // namespace kreg
