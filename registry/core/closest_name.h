// "Did you mean ...?": the closest of some names to one that was not found
// (a kernel name, a manifest key).
#pragma once

#include <string>
#include <vector>

namespace kreg {

// The candidate with the smallest edit distance, if it is close enough to be a
// plausible typo (distance <= max(2, len/3)); empty otherwise.
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace kreg
