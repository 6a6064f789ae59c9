// The constants of an isolated call's "C" message that both of its C++ ends
// read: the parent's fast path (isolated_call.cc) and the worker's ring loop
// (ring_worker.cc). The message itself is defined in
// registry/isolation/wire.py; each constant names its Python twin.
#pragma once

#include <array>
#include <cstdint>

namespace kreg::call_message {

inline constexpr uint32_t kNoRegion = 0xFFFFFFFFu;  // wire.NO_REGION: a NULL data pointer
// A tensor's region id carries these flags (wire.GUARD_AFTER, GUARD_BEFORE):
// on CUDA, the kZone bytes after its end / before its start hold no data
// (the binding's output padding, the staging layout), so the worker keeps
// canaries there while the kernel runs and replies G if one changed.
inline constexpr uint32_t kGuardAfter = 1u << 31;
inline constexpr uint32_t kGuardBefore = 1u << 30;
// wire.WATCH: on CUDA, an argument the kernel writes in place, whose
// neighbours are other data or free memory: the worker reads the kZone bytes
// on each side (within the region) before the call and after it; when they
// changed it writes back what they held and replies G.
inline constexpr uint32_t kWatch = 1u << 29;
inline constexpr uint32_t kRegionBits = kWatch - 1;  // wire.REGION_BITS
inline constexpr int64_t kZone = 64;                      // guards.ZONE

// guards.CANARY: not zero, not a repeated byte, not a small float, so a
// kernel writing its values or clearing memory changes it.
inline constexpr uint8_t canary_byte(int i) { return static_cast<uint8_t>((0xA7 + 89 * i) & 0xFF); }

// The kZone canary bytes, as one array (compared and copied whole).
inline constexpr std::array<uint8_t, kZone> kCanary = [] {
  std::array<uint8_t, kZone> bytes{};
  for (int i = 0; i < kZone; ++i) bytes[i] = canary_byte(i);
  return bytes;
}();

}  // namespace kreg::call_message
