// Header libraries that installed Python packages provide: the manifest's
// `header_packages = ["nvidia-cutlass"]`.
//
// A manifest names a distribution, never a path: the table here says where
// its headers sit inside the package's import folder, and Python
// (registry/header_packages.py) finds that folder on sys.path and reads the
// version. So one manifest builds on every machine and checkout that has the
// package installed, and nothing is copied into the kernel's folder.
//
// What a found package adds to a build (build_keys.h): its include dirs
// after the manifest's own, its files labeled "pkg:<name>/<path in the
// import folder>" (keys stay equal across machines; content decides), and
// the key input "package:<name>" = its version, which status().changes
// shows when the package is upgraded.
#pragma once

#include <string>
#include <vector>

namespace kreg {

// A package a manifest may name.
struct KnownHeaderPackage {
  std::string distribution;               // pip's name: "nvidia-cutlass"
  std::string import_folder;              // its folder on sys.path: "cutlass_library"
  std::vector<std::string> include_dirs;  // relative to that folder, in search order
  std::string extra;                      // the registry's pip extra that pins it: "cutlass"
};

// Every package a manifest may name, by distribution name.
const std::vector<KnownHeaderPackage>& known_header_packages();
// The entry named exactly `distribution`, or nullptr.
const KnownHeaderPackage* find_header_package(const std::string& distribution);

// A package as it was found on this machine (registry/header_packages.py).
struct HeaderPackage {
  std::string name;                       // the distribution, as the manifest names it
  std::string version;                    // its installed version
  std::string root;                       // its import folder (absolute)
  std::vector<std::string> include_dirs;  // absolute, in search order
  // Its installed metadata file (absolute), or "": watched beside the
  // kernel's files, so that a `get` sees an upgrade without a re-plan.
  std::string metadata;
};

}  // namespace kreg
