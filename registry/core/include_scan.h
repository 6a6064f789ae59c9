// The include closure of a kernel's sources, found without running a compiler.
//
// This is what makes a header edit change the key before anything has been
// built. It reads #include lines textually and resolves them like the
// compiler would for the project's own files:
//   #include "x"  -> the including file's folder, then the include dirs in order
//   #include <x>  -> the include dirs in order
// A name that resolves nowhere is a system or toolkit header (torch, CUDA,
// the C++ library); those are covered by the toolchain identities in the key
// and are left out. The scan is deliberately conservative: includes inside
// #if blocks and comments that look like includes still count, so it can
// only over-approximate. Includes spelled through macros cannot be seen here;
// the compiler's dependency list, kept in the cache's dependency record after
// each build (dep_record.h), covers them.
#pragma once

#include <string>
#include <vector>

namespace kreg {

struct IncludeClosure {
  // Absolute, normalized paths: the sources themselves and every project
  // header they reach, sorted, each once.
  std::vector<std::string> files;
  // "file:line: name" for quoted includes that resolved nowhere (usually a
  // typo; the compiler will say more).
  std::vector<std::string> unresolved;
};

// `sources` and `include_dirs` are absolute paths. Cycles and repeated
// includes are fine. Unreadable sources are listed in `unresolved`.
IncludeClosure scan_include_closure(const std::vector<std::string>& sources,
                                    const std::vector<std::string>& include_dirs);

// The include directives of one file's text, in order, as (name, is_angled,
// line). Exposed for tests and fuzzing.
struct IncludeDirective {
  std::string name;
  bool angled = false;
  int line = 0;
};
std::vector<IncludeDirective> find_include_directives(const std::string& text);

}  // namespace kreg
