// Output memory an isolated worker maps: the outputs an isolated CPU op's
// binding allocates come from here (registry/isolation/), so the worker's
// launcher writes them in place and nothing is copied back after the call.
//
// Each allocation is one segment: a memfd (its fd is what the worker maps,
// sent once per segment and worker) mapped MAP_SHARED here, its size rounded
// up to a power of two so that a later output of a similar size reuses it. A
// released segment is kept for reuse; beyond kRetainedFreeBytes of released
// segments the oldest are unmapped (never the latest released: a loop's next
// call reuses it, whatever its size) and their ids queued in take_retired(),
// for the workers to drop. Thread-safe: a tensor's memory may be released
// from any thread, without Python's lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace kreg {

struct SharedSegment {
  int64_t id = 0;        // unique in this process, never reused
  int fd = -1;           // the memfd (kept open: sent to each worker that needs it)
  uintptr_t base = 0;    // where it is mapped here
  int64_t size = 0;      // bytes
};

class SharedOutputPool {
 public:
  static constexpr int64_t kMinBytes = 64 * 1024;  // smaller outputs are cheaper to stage through a copy
  static constexpr int64_t kRetainedFreeBytes = 256ll << 20;

  SharedOutputPool() = default;
  SharedOutputPool(const SharedOutputPool&) = delete;
  SharedOutputPool& operator=(const SharedOutputPool&) = delete;
  ~SharedOutputPool();

  // nbytes of shared memory, or nullptr (the caller allocates its own way):
  // always below kMinBytes.
  void* allocate(int64_t nbytes);
  // Returns what allocate() gave; unknown pointers are ignored.
  void release(void* pointer);
  // The segment holding [address, address + nbytes), if one does.
  std::optional<SharedSegment> segment_of(uintptr_t address, int64_t nbytes) const;
  // Ids of the segments unmapped since the last call.
  std::vector<int64_t> take_retired();
  // Whether take_retired() has ids to give (an isolated call's fast path
  // leaves them to the Python side, which tells the workers).
  bool has_retired() const;

  int64_t mapped_bytes() const;

 private:
  struct Slot {
    SharedSegment segment;
    bool in_use = false;
    uint64_t released_at = 0;  // a counter: which free slot is the oldest
  };
  void retire_over_cap();  // with mutex_ held

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
  std::vector<int64_t> retired_;
  int64_t next_id_ = 0;
  uint64_t clock_ = 0;
};

// The process's pool: what the binding's table hooks reach.
SharedOutputPool& shared_output_pool();

}  // namespace kreg

// The table hooks (core/launcher_table.h): plain C functions, so that a
// binding reaches the pool through two pointers and no core header.
extern "C" void* kreg_shared_output_allocate(int64_t nbytes);
extern "C" void kreg_shared_output_release(void* pointer);
