#include "header_packages.h"

namespace kreg {

const std::vector<KnownHeaderPackage>& known_header_packages() {
  // CUTLASS and CuTe: the wheel ships the headers under cutlass_library/source
  // (include/ holds cute/ and cutlass/; tools/util/include the host utilities).
  static const std::vector<KnownHeaderPackage> kKnown = {
      {"nvidia-cutlass", "cutlass_library", {"source/include", "source/tools/util/include"}, "cutlass"},
  };
  return kKnown;
}

const KnownHeaderPackage* find_header_package(const std::string& distribution) {
  for (const KnownHeaderPackage& known : known_header_packages()) {
    if (known.distribution == distribution) return &known;
  }
  return nullptr;
}

}  // namespace kreg
