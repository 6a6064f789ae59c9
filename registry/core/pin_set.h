// The cache entries one process has loaded, pinned for the rest of its life
// (see the pins at the end of cache_store.h's header comment). One object per
// process owns them (registry/state.py); hold() pins what is not pinned yet
// and marks every entry used now, so a `get` pins and touches in one call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cache_store.h"

namespace kreg {

class PinSet {
 public:
  // Throws std::runtime_error ("call get() again") when an entry was removed
  // by a `cache gc` elsewhere since it was looked up; earlier keys stay pinned.
  void hold(const CacheStore& store, const std::vector<std::string>& keys);
  std::vector<std::string> held() const;  // sorted

 private:
  std::map<std::string, Pin> pins_;
};

}  // namespace kreg
