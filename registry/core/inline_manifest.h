// The manifest of a kernel written in a notebook cell (%%kernel,
// registry/notebook/magics.py), composed here rather than by string
// formatting in Python: every value goes through toml_quote (toml_util.h), the
// one TOML escaper of the core, so nothing in the cell's line can add a key
// or a section. Its format is kernel.toml's (manifest.h), but it is never
// written: inline_manifest parses it in memory and inline_kernels.h holds the
// result, where every later `get` of the name finds it. Only the cell's
// source is a file (`inline/<name>/` in the cache), as the compilers read
// files and diagnostics name lines.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "manifest.h"

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

// The cell's manifest, parsed from that text in memory. `dir` is the folder
// of the cell's source; there is no kernel.toml in it. The result's `file` is
// the label "%%kernel <name>" (what errors name) and its `inline_text` the
// text, which the key covers as "file:kernel.toml" (build_keys.cc). Throws as
// inline_manifest_text, and ManifestError for what the parser refuses.
Manifest inline_manifest(const InlineKernel& cell, const std::string& dir);

}  // namespace kreg
