// The call channel between a process and its isolated CPU worker
// (registry/isolation/): one shared mapping holding a single-slot mailbox.
// Calls are serialized (one in flight per worker), so one request slot and
// one reply slot are all a ring would ever hold.
//
// Layout, version 1 (kCallRingVersion; the mapping is a memfd the parent
// makes and sends over the worker's socket as wire.py's "Q" message):
//
//   offset 0      u64 magic "kregRNG1", u32 version, u32 total size in bytes
//   offset 64     u32 request_seq   the futex word the worker sleeps on: the
//                                   parent bumps it to post a request
//                 u32 worker_asleep 1 while the worker is in (or entering)
//                                   FUTEX_WAIT on request_seq
//                 u32 request_kind  kRequestCall or kRequestYield
//                 u32 request_bytes
//                 u32 worker_cpu    the core the worker last waited on
//   offset 128    u32 reply_seq     the futex word the parent sleeps on: the
//                                   worker sets it to request_seq once the
//                                   request is done (its reply written)
//                 u32 parent_asleep 1 while the parent is in FUTEX_WAIT on reply_seq
//                 u32 reply_bytes
//                 u32 parent_cpu    the core the parent last waited on
//   offset 4096   the request: a wire.py "C" message, byte for byte
//   offset 4096 + kRequestCapacity   the reply: wire.py's K / E + text
//
// Each side spins a bounded time on the other's word (yielding its core from
// the start when the other side last ran on the same one: there a busy spin
// only keeps the other side from running), then sleeps on a futex;
// the waker issues FUTEX_WAKE only when the sleeper's flag says it sleeps
// (flag and word are both sequentially consistent, so a wake is never lost:
// the sleeper sets its flag, then re-reads the word before it sleeps).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kreg {

inline constexpr uint64_t kCallRingMagic = 0x31474e5267657262ULL;  // "kregRNG1" little-endian
inline constexpr uint32_t kCallRingVersion = 1;
inline constexpr uint32_t kRequestCall = 1;   // run the "C" message in the request area, reply
inline constexpr uint32_t kRequestYield = 2;  // leave the ring loop: socket messages follow
inline constexpr size_t kRequestOffset = 4096;
inline constexpr size_t kRequestCapacity = 1 << 20;  // wire.MAX_MESSAGE
inline constexpr size_t kReplyOffset = kRequestOffset + kRequestCapacity;
inline constexpr size_t kReplyCapacity = 64 * 1024;
inline constexpr size_t kCallRingBytes = kReplyOffset + kReplyCapacity;

struct CallRingHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t size;
  alignas(64) std::atomic<uint32_t> request_seq;
  std::atomic<uint32_t> worker_asleep;
  uint32_t request_kind;
  uint32_t request_bytes;
  std::atomic<uint32_t> worker_cpu;
  alignas(64) std::atomic<uint32_t> reply_seq;
  std::atomic<uint32_t> parent_asleep;
  uint32_t reply_bytes;
  std::atomic<uint32_t> parent_cpu;
};
static_assert(sizeof(CallRingHeader) <= kRequestOffset, "the header fits its page");

enum class WaitResult { kReady, kTimedOut, kInterrupted };

// How long one side spins before it sleeps. A spin only pays while the other
// side runs on another core: on an idle machine back-to-back calls then cost
// no wake-up at all, but where more threads are runnable than there are
// cores the other side may be waiting for this very core, and every spin
// delays it (measured on 2 cores under a load of 10: 420-480 us a call with
// a 100 us spin, 37-45 us with a 2 us one). So a spin that ends without what
// it waited for halves the next one (down to kMinSpinNs); one that gets it
// restores the full spin; and every kProbeEvery waits at the floor try the
// full spin again, so a machine that became idle gets it back.
class SpinPolicy {
 public:
  static constexpr int64_t kMinSpinNs = 2000;
  static constexpr int kProbeEvery = 64;
  explicit SpinPolicy(int64_t max_ns = 50000) { set_max(max_ns); }
  void set_max(int64_t max_ns) { max_ns_ = budget_ns_ = max_ns < kMinSpinNs ? kMinSpinNs : max_ns; }
  int64_t next() {
    if (budget_ns_ > kMinSpinNs || ++floor_waits_ < kProbeEvery) return budget_ns_;
    floor_waits_ = 0;
    return max_ns_;
  }
  void done(bool caught) {
    if (caught) {
      budget_ns_ = max_ns_;
    } else if (budget_ns_ > kMinSpinNs) {
      budget_ns_ = budget_ns_ / 2 < kMinSpinNs ? kMinSpinNs : budget_ns_ / 2;
    }
  }
  int64_t budget_ns() const { return budget_ns_; }

 private:
  int64_t max_ns_ = 0, budget_ns_ = 0;
  int floor_waits_ = 0;
};

// A mapped channel, as either side sees it.
class CallRing {
 public:
  // A new channel: a memfd of kCallRingBytes, mapped, its header written. Throws on failure.
  static CallRing create();
  // The channel of `fd` (the parent's, received over the socket); checks magic and version.
  static CallRing attach(int fd);
  CallRing() = default;
  CallRing(CallRing&& other) noexcept;
  CallRing& operator=(CallRing&& other) noexcept;
  CallRing(const CallRing&) = delete;
  CallRing& operator=(const CallRing&) = delete;
  ~CallRing();

  int fd() const { return fd_; }
  CallRingHeader* header() const { return header_; }
  uint8_t* request() const { return base() + kRequestOffset; }
  uint8_t* reply() const { return base() + kReplyOffset; }

  // Parent: true when the last request is done (a new one may be posted).
  bool idle() const;
  // Parent: posts the request already written to request() (`bytes` of it).
  void post(uint32_t kind, uint32_t bytes);
  // Parent: spins for the reply (the policy's spin, at most max_spin_ns); false if it has not come.
  bool spin_for_reply(int64_t max_spin_ns);
  // Parent: sleeps up to timeout_ns for the reply (EINTR: kInterrupted).
  WaitResult wait_for_reply(int64_t timeout_ns);

  // Worker: the next request (spins at most max_spin_ns, then sleeps); its kind and bytes.
  void next_request(int64_t max_spin_ns, uint32_t* kind, uint32_t* bytes);
  // This side's current spin, and how many posts found the worker asleep (tests, benchmarks).
  int64_t spin_budget_ns() const { return spin_.budget_ns(); }
  int64_t wakes() const { return wakes_; }
  // Worker: the request is done; `bytes` of reply() hold the reply.
  void finish(uint32_t bytes);

 private:
  uint8_t* base() const { return reinterpret_cast<uint8_t*>(header_); }
  int fd_ = -1;
  CallRingHeader* header_ = nullptr;
  uint32_t seen_ = 0;  // worker: the last request_seq it took
  SpinPolicy spin_;    // this side's (each process maps the channel once, for one role)
  int64_t spin_max_ns_ = -1;
  int64_t wakes_ = 0;
};

}  // namespace kreg
