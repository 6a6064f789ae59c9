// The manifest of a kernel written in a notebook cell (%%kernel,
// registry/notebook/magics.py), composed here rather than by string
// formatting in Python: every value goes through toml_quote (toml_util.h), the
// one TOML escaper of the core, so nothing in the cell's line can add a key
// or a section. The text is written as the cell's kernel.toml in the cache
// (`inline/<name>/`), where discovery and every later `get` read it as any
// manifest; its format is kernel.toml's (manifest.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kreg {

struct InlineKernel {
  std::string name;
  std::string backend;  // "cpu" or "cuda": the manifest's one backend table
  std::string source;   // the cell's body, written beside the manifest
  std::string signature;
  std::vector<std::string> dtypes;
  std::vector<std::pair<std::string, std::string>> outputs;  // --outputs: the op's outputs table, in order
};

// kernel.toml's text for `cell`. Throws std::invalid_argument for a name
// that is not a kernel name or a backend other than "cpu" or "cuda" (what
// else is wrong, the manifest's parser says when the text is read).
std::string inline_manifest_text(const InlineKernel& cell);

}  // namespace kreg
