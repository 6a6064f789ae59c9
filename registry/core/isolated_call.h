// An isolated op's call, the parent's side, without Python on the way
// (registry/isolation/: proxy.py makes the slots, supervisor.py the channels).
//
// An isolated op's proxy table (kreg/launcher_table.h) has kreg_isolated_entry
// as its entry and an IsolatedSlot per dtype in launchers[]: the binding
// calls the entry with the slot as "launcher". The entry writes the call as
// wire.py's "C" message into the worker's call channel (call_ring.h), waits
// for the reply and returns it as the launcher would: the same bytes
// proxy.py's Link.forward sends, built from the same tables (the worker's
// regions, the shared output pool, the staging buffer, the canaries of
// guards.py). Whatever it cannot do alone (memory the worker has not been
// sent, a staging buffer to grow, a worker not in its ring loop, a wait past
// the spin, a fault) goes to Python: the slot's fallback (the Python
// launcher of the same prototype, through the kernel library's own entry) or
// its slow-path callback.
//
// A CUDA call differs in three places: its tensors are allocations the
// worker opened by IPC (the channel's cuda_allocations, each checked against
// the driver's buffer id, so memory freed and allocated again at the same
// address is never mistaken for the one the worker maps); before posting, the
// parent waits for its own stream (the worker's context cannot see it); and
// a reply 'F' is a fault of the worker's context (the worker exits after it).
// The driver's functions come from Python (set_cuda_driver): the core links
// no CUDA library. Here and not in a library of its own: the parent
// already loads the core, and the worker loads the same module with ctypes
// (ring_worker.h), so both sides share one build and one layout.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../include/kreg/abi.h"
#include "call_ring.h"

namespace kreg {

// One worker's channel, as its parent sees it. Python fills the tables as it
// sends the worker memory (supervisor.py); the fast path only reads them.
struct IsolatedChannel {
  struct Region {
    uintptr_t base;
    uintptr_t end;
    uint32_t id;
  };
  // A CUDA allocation the worker opened by IPC (cuda_memory.py): the driver's
  // buffer id tells it from a later allocation at the same address.
  struct CudaAllocation {
    uintptr_t base;
    uintptr_t end;
    uint64_t buffer_id;
    uint32_t id;
  };
  // The CUDA driver's entries the fast path calls (CUresult is an int; CUstream a pointer).
  struct CudaDriver {
    int (*stream_query)(void* stream) = nullptr;
    int (*stream_synchronize)(void* stream) = nullptr;
    int (*pointer_get_attribute)(void* value, int attribute, uintptr_t pointer) = nullptr;
  };

  CallRing ring;
  uint64_t generation = 0;               // unique per channel: a slot's launcher id is this worker's
  std::atomic<bool> in_ring{false};      // the worker runs its ring loop (Python sent it "R")
  std::atomic<bool> busy{false};         // a call is being written or awaited
  std::atomic<bool> broken{false};       // a call was abandoned mid-way: Python replaces the worker
  int64_t spin_ns = 50000;               // the parent's spin before the wait goes to Python
  // Calls the fast path posted, those it completed, and its staging.
  std::atomic<int64_t> posts{0}, calls{0}, staged_calls{0}, staged_bytes{0};

  std::mutex tables;                     // guards what follows (a storage may die on any thread)
  std::vector<Region> storages;          // shared CPU storages
  std::unordered_map<int64_t, uint32_t> pool;  // shared output pool segment id -> region id
  uint32_t staging_region = 0;
  uintptr_t staging_base = 0;
  int64_t staging_size = 0;
  // A CUDA worker's channel: the driver is set and the allocations are its tensors' memory.
  bool cuda = false;
  CudaDriver driver;
  std::vector<CudaAllocation> cuda_allocations;
};

// What the fast path hands to Python (the slot's slow-path callback).
enum SlowCode : int {
  kSlowWait = 1,     // no reply within the spin: wait for it. 1: it came; else the call failed
  kSlowOverrun = 2,  // a canary changed: a = parameter index, b = 0 after, 1 before; returns 0
  kSlowDeviceFault = 3,  // the worker replied 'F' (its context faulted; the reply holds why); returns 0
};
using SlowPath = int (*)(int code, const kreg_value* values, int64_t a, int64_t b);

// One dtype slot of an isolated op's proxy table.
struct IsolatedSlot {
  const void* fallback = nullptr;        // the Python launcher (proxy.py's ctypes callback)
  kreg_entry_fn source_entry = nullptr;  // the kernel library's entry, which calls `fallback`
  SlowPath slow = nullptr;
  const char* fault_text = nullptr;      // proxy.py's FAULT_TEXT
  std::string kinds;                     // per launcher parameter, wire.py's KINDS
  std::string roles;                     // per parameter: 'o' output, 'm' Tensor(a!), 'i' read only
  std::vector<int64_t> item_sizes;       // bytes per element (0: not a tensor)
  uint64_t generation = 0;               // the channel launcher_id belongs to
  uint32_t launcher_id = 0;
  std::string error;                     // the last launcher error, alive while the binding reads it
};

// The channels of the plain workers (one per backend), found by generation.
void add_channel(std::shared_ptr<IsolatedChannel> channel);
void drop_channel(uint64_t generation);
std::shared_ptr<IsolatedChannel> channel_of(uint64_t generation);

}  // namespace kreg

extern "C" const char* kreg_isolated_entry(const void* slot, const kreg_value* values, void* stream, int32_t wide);
