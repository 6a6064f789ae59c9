#include "pin_set.h"

namespace kreg {

void PinSet::hold(const CacheStore& store, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (!pins_.count(key)) pins_.emplace(key, store.pin(key));
    store.touch(key);
  }
}

std::vector<std::string> PinSet::held() const {
  std::vector<std::string> keys;
  for (const auto& [key, pin] : pins_) keys.push_back(key);
  return keys;
}

}  // namespace kreg
