#include "remote_layout.h"

#include <stdexcept>

namespace kreg {

namespace {

const char kPrefix[] = "kreg:v1:";

void check_name(const std::string& name, const char* what) {
  if (name.empty() || name.find('\0') != std::string::npos || name.find(':') != std::string::npos ||
      name.find('/') != std::string::npos) {
    throw std::invalid_argument(std::string("invalid ") + what + " '" + name +
                                "' for the remote cache: expected a plain name such as a hex digest");
  }
}

}  // namespace

std::string remote_object_key(const std::string& key_hex) {
  check_name(key_hex, "cache key");
  return std::string(kPrefix) + "object:" + key_hex;
}

std::string remote_kernel_key(const std::string& kernel) {
  check_name(kernel, "kernel name");
  return std::string(kPrefix) + "kernel:" + kernel;
}

std::string remote_claim_key(const std::string& key_hex) {
  check_name(key_hex, "cache key");
  return std::string(kPrefix) + "claim:" + key_hex;
}

std::string remote_file_key(const std::string& relative_path) {
  bool ok = !relative_path.empty() && relative_path.front() != '/' &&
            relative_path.find('\0') == std::string::npos;
  size_t start = 0;
  while (ok) {
    const size_t slash = relative_path.find('/', start);
    const std::string part = relative_path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    ok = !part.empty() && part != "." && part != "..";
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (!ok) {
    throw std::invalid_argument("invalid cache record path '" + relative_path +
                                "' for the remote cache: expected a path relative to v1/, "
                                "such as deps/<key>.toml");
  }
  return std::string(kPrefix) + "file:" + relative_path;
}

}  // namespace kreg
