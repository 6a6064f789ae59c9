#include "derived_manifest.h"

#include <iterator>

#include "identifier.h"

namespace kreg {

Manifest with_extra_flags(const Manifest& manifest, const std::string& backend,
                          const std::vector<std::string>& cflags, const std::vector<std::string>& ldflags,
                          const std::string& variant) {
  if (backend != "cpu" && backend != "cuda") {
    throw ManifestError(manifest.file, "", "no backend '" + backend + "': a derived build is of \"cpu\" or \"cuda\"");
  }
  if (variant.empty() || !is_c_identifier(variant)) {
    throw ManifestError(manifest.file, "", "a derived build's variant name must be an identifier, not '" +
                                               variant + "'");
  }
  Manifest out = manifest;
  BackendSpec& section = backend == "cpu" ? out.cpu : out.cuda;
  if (!section.present) {
    throw ManifestError(manifest.file, backend, "the kernel has no [" + backend + "] section to build");
  }
  // The section's flags, not the top-level `cflags` that the config's defines
  // close (apply_config replaces those from the end): a checked build of
  // another config stays what it says.
  section.cflags.insert(section.cflags.end(), cflags.begin(), cflags.end());
  out.ldflags.insert(out.ldflags.end(), ldflags.begin(), ldflags.end());
  out.variant = manifest.variant.empty() ? variant : manifest.variant + "+" + variant;
  return out;
}

}  // namespace kreg
