#include "dtype_units.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "dtype.h"

namespace kreg {

namespace {

// The source's file name without its extension: "gemm_bf16.cu" -> "gemm_bf16".
std::string stem_of(const std::string& source) { return std::filesystem::path(source).stem().string(); }

}  // namespace

Manifest with_dtypes(const Manifest& manifest, const std::string& backend, const std::vector<std::string>& dtypes) {
  Manifest out = manifest;
  BackendSpec& spec = backend == "cuda" ? out.cuda : out.cpu;
  const std::set<std::string> wanted(dtypes.begin(), dtypes.end());
  std::set<std::string> left_out;  // sources
  for (OpSpec& op : out.ops) {
    std::vector<std::string> kept;
    for (const std::string& dtype : op.dtypes) {
      const std::string symbol = op.launcher + "_" + dtype_suffix(dtype);
      const auto own_unit = std::find_if(spec.sources.begin(), spec.sources.end(),
                                         [&](const std::string& s) { return stem_of(s) == symbol; });
      if (wanted.count(dtype) || own_unit == spec.sources.end()) {
        kept.push_back(dtype);
      } else {
        left_out.insert(*own_unit);
      }
    }
    if (kept.empty()) {  // the op's last dtype stays, with its unit
      kept.push_back(op.dtypes.front());
      left_out.erase(*std::find_if(spec.sources.begin(), spec.sources.end(), [&](const std::string& s) {
        return stem_of(s) == op.launcher + "_" + dtype_suffix(op.dtypes.front());
      }));
    }
    op.dtypes = kept;
  }
  if (left_out.empty()) return manifest;
  std::vector<std::string> sources;
  for (const std::string& s : spec.sources) {
    if (!left_out.count(s)) sources.push_back(s);
  }
  spec.sources = sources;
  out.dtype_subset.clear();
  for (const OpSpec& op : out.ops) {
    for (const std::string& dtype : op.dtypes) out.dtype_subset.push_back(op.signature.name + ":" + dtype);
  }
  return out;
}

}  // namespace kreg
