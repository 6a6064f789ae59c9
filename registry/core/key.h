// The content key of a build, and the record of what went into it.
//
// A key is FieldHasher over a list of named inputs. The inputs are kept (not
// just the digest) so that "why did it rebuild?" has an answer: diff the
// inputs of the previous key against the current ones.
//
// Input names used by the registry (values are literal text, or a content
// digest for files); plan.h makes the kernel-lib and binding keys from them,
// and says which go into which:
//   key.format            kKeyFormat
//   kernel                the kernel's name
//   backend               cpu | cuda
//   kind                  kernel-lib | binding | module
//   file:<relpath>        content digest of a source, header or manifest
//   flags.<name>          one input per flag list, items joined with NUL
//   toolchain.<tool>      resolved compiler path + its version line
//   env.<name>            torch, cuda, python versions, target arch, ...
//   deps.unverified       a unique value: a reported dependency changed during
//                         the build, so the artifact must never be reused
//                         (dep_record.h adds the files the compiler reported)
#pragma once

#include <string>
#include <vector>

#include "hash.h"

namespace kreg {

inline constexpr int kKeyFormat = 1;

struct KeyInput {
  std::string name;
  std::string value;
};

struct Key {
  Digest digest;
  std::vector<KeyInput> inputs;  // sorted by name, names unique
};

class KeyBuilder {
 public:
  // Adds (or replaces) a literal input.
  KeyBuilder& add(const std::string& name, const std::string& value);
  // Adds a list input; items are joined with NUL so ["-I", "-O2"] and ["-I-O2"] differ.
  KeyBuilder& add_list(const std::string& name, const std::vector<std::string>& items);
  // Adds "file:<label>" = content digest of `path`. Throws std::runtime_error
  // naming the path when it cannot be read.
  KeyBuilder& add_file(const std::string& label, const std::string& path);
  // Adds "file:<label>" = an already known digest.
  KeyBuilder& add_file_digest(const std::string& label, const Digest& digest);

  Key finish() const;

 private:
  std::vector<KeyInput> inputs_;
};

// Human-readable differences, one line each, e.g.
//   "file:include/axpy_math.h changed"
//   "flags.cuda: -O3 -> -O3 -lineinfo"
//   "env.torch: 2.13.0 -> 2.14.1"
//   "file:extra.h added" / "file:old.h removed"
std::vector<std::string> diff_key_inputs(const std::vector<KeyInput>& before,
                                         const std::vector<KeyInput>& after);

}  // namespace kreg
