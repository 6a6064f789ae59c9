#include "ring_worker.h"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "../include/kreg/abi.h"
#include "../include/kreg/launcher_table.h"
#include "call_message.h"
#include "call_ring.h"

namespace kreg::ring_worker {
namespace {

using call_message::kGuardAfter;
using call_message::kGuardBefore;
using call_message::kNoRegion;
using call_message::kRegionBits;
using call_message::kWatch;
using call_message::kZone;
constexpr int kMaxParams = KREG_TABLE_MAX_ARGS + KREG_TABLE_MAX_OUTPUTS;
constexpr char kGuardLog[] = "kreg-guard-page:";  // wire.GUARD_LOG

struct Launcher {
  kreg_entry_fn entry = nullptr;
  const void* launcher = nullptr;
  std::string kinds;
  std::vector<int64_t> item_sizes;
  int32_t wide = 0;  // a float64 launcher: its float parameters are double ('d')
  // Per parameter: the sizes + strides, or the int[] items, of the current call.
  std::vector<int64_t> dims[kMaxParams];
};

struct Region {
  uintptr_t base, end, reserved, reserved_end;
};

// The tensor arguments of the call in flight, for the fault handler.
struct CallTensor {
  int index;
  uint32_t region;
  uintptr_t start, end;
};

// A CUDA worker's stream and the driver entries it waits and guards with.
struct Cuda {
  void* stream = nullptr;
  int (*stream_query)(void*) = nullptr;
  int (*stream_synchronize)(void*) = nullptr;
  int (*error_name)(int, const char**) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  int (*copy_to_device)(uint64_t, const void*, size_t, void*) = nullptr;  // cuMemcpyHtoDAsync_v2
  int (*copy_to_host)(void*, uint64_t, size_t, void*) = nullptr;          // cuMemcpyDtoHAsync_v2
  int (*alloc_host)(void**, size_t) = nullptr;                           // cuMemAllocHost_v2
  // Pinned: the canary, then what each zone held after the kernel, then
  // what each watched zone held before it (pinned_slot).
  uint8_t* pinned = nullptr;
};

// A guarded zone of the call in flight (call_message.h's flags): a canary's
// (padding that holds no data), or watched (another tensor's bytes or free
// memory: compared with what it held before the call, and written back).
struct GuardZone {
  uint64_t at;
  int64_t size;  // <= kZone
  int index;
  const char* side;
  bool watched;
};
constexpr int kMaxZones = 2 * (KREG_TABLE_MAX_ARGS + KREG_TABLE_MAX_OUTPUTS);  // two per tensor at most
constexpr int kCudaErrorNotReady = 600;         // CUDA_ERROR_NOT_READY
constexpr int64_t kStreamSpinNs = 20'000'000;   // as worker.FINISH_SPIN_SECONDS

CallRing ring;
Cuda cuda;
bool context_lost = false;  // a call's stream reported an error: reply, then exit
std::vector<Launcher> launchers;  // by id (1, 2, ...)
std::unordered_map<uint32_t, Region> regions;
CallTensor call_tensors[kMaxParams];
volatile sig_atomic_t call_tensor_count = 0;
volatile sig_atomic_t in_call = 0;
struct sigaction previous_action;
bool handler_installed = false;

template <typename T>
T read(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

uint32_t reply_text(char kind, const char* text) {
  uint8_t* out = ring.reply();
  out[0] = static_cast<uint8_t>(kind);
  size_t n = text != nullptr ? std::strlen(text) : 0;
  if (n > kReplyCapacity - 1) n = kReplyCapacity - 1;
  if (n > 0) std::memcpy(out + 1, text, n);
  return static_cast<uint32_t>(1 + n);
}

// Waits for the worker's stream (worker.py's Cuda.finish): polled while a
// kernel is short, as a blocking wait wakes ~100 us after it ends; a long one
// is waited for without a spinning core. The driver's result.
int finish_stream() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kStreamSpinNs);
  for (;;) {
    const int result = cuda.stream_query(cuda.stream);
    if (result != kCudaErrorNotReady) return result;
    if (std::chrono::steady_clock::now() > until) return cuda.stream_synchronize(cuda.stream);
  }
}

// "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered", as worker.py's error_text.
std::string cuda_error_text(int result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuda.error_name != nullptr) cuda.error_name(result, &name);
  if (cuda.error_string != nullptr) cuda.error_string(result, &text);
  return std::string(name != nullptr ? name : "CUDA error") + " (" + std::to_string(result) + "): " +
         (text != nullptr ? text : "");
}

// kZone bytes of pinned memory: slot 0 the canary, 1 + k what zone k held
// after the kernel, 1 + kMaxZones + k what watched zone k held before it.
uint8_t* pinned_slot(int slot) { return cuda.pinned + static_cast<size_t>(slot) * kZone; }

// Before the kernel, on the worker's stream: writes the canary into each
// canary zone, and reads each watched zone into pinned memory (what to
// compare with and write back), all ordered with the launch and with the
// copies back that run_call queues after it. An error's text, or null.
const char* arm_zones(const GuardZone* zones, int count) {
  static std::string error;
  if (cuda.copy_to_device == nullptr || cuda.copy_to_host == nullptr) {
    return "the isolated worker was asked to guard CUDA memory without the driver's copies";
  }
  if (cuda.pinned == nullptr) {
    void* pinned = nullptr;
    const int result = cuda.alloc_host(&pinned, (2 * kMaxZones + 1) * kZone);
    if (result != 0) return (error = "cuMemAllocHost for the isolated call's canaries: " + cuda_error_text(result)).c_str();
    cuda.pinned = static_cast<uint8_t*>(pinned);
    std::memcpy(cuda.pinned, call_message::kCanary.data(), kZone);
  }
  for (int k = 0; k < count; ++k) {
    const GuardZone& z = zones[k];
    const int result = z.watched ? cuda.copy_to_host(pinned_slot(1 + kMaxZones + k), z.at, z.size, cuda.stream)
                                 : cuda.copy_to_device(z.at, pinned_slot(0), z.size, cuda.stream);
    if (result != 0) return (error = "guarding the isolated call's arguments: " + cuda_error_text(result)).c_str();
  }
  return nullptr;
}

// Adds the watched zones around tensor `index`: the kZone bytes on each side
// that lie within its region [base, end). (drop_shared_zones then drops those
// that meet another tensor of the call, which the kernel may write.)
int watch_zones(GuardZone* zones, int count, int index, uintptr_t start, uintptr_t end, const Region& region) {
  constexpr auto zone = static_cast<uintptr_t>(kZone);
  const uintptr_t before = start - region.base >= zone ? start - zone : region.base;  // start >= base
  const uintptr_t after = end >= region.end ? end : std::min(end + zone, region.end);
  if (before < start) zones[count++] = GuardZone{before, static_cast<int64_t>(start - before), index, "before", true};
  if (end < after) zones[count++] = GuardZone{end, static_cast<int64_t>(after - end), index, "after", true};
  return count;
}

// Drops the watched zones that meet a tensor of the call other than their own.
int drop_shared_zones(GuardZone* zones, int count, const CallTensor* tensors, int tensor_count) {
  int kept = 0;
  for (int k = 0; k < count; ++k) {
    const GuardZone& z = zones[k];
    bool shared = false;
    for (int t = 0; z.watched && t < tensor_count && !shared; ++t) {
      shared = tensors[t].index != z.index && tensors[t].start < z.at + z.size && z.at < tensors[t].end;
    }
    if (!shared) zones[kept++] = z;
  }
  return kept;
}

// Runs the "C" message of `bytes` in the request area; the reply's length.
uint32_t run_call(uint32_t bytes) {
  const uint8_t* in = ring.request();
  const uint8_t* stop = in + bytes;
  const uint32_t id = read<uint32_t>(in + 1);
  if (in[0] != 'C' || id == 0 || id > launchers.size() || launchers[id - 1].entry == nullptr) {
    return reply_text('E', ("the isolated worker has no launcher " + std::to_string(id)).c_str());
  }
  Launcher& l = launchers[id - 1];
  kreg_value values[kMaxParams];
  const uint8_t* at = in + 5;
  int tensors = 0;
  GuardZone zones[kMaxZones];
  int zone_count = 0;
  for (size_t i = 0; i < l.kinds.size(); ++i) {
    kreg_value& v = values[i];
    switch (l.kinds[i]) {
      case 'T': {
        const int64_t ndim = read<int64_t>(at);
        if (ndim < 0) {
          v.tensor = kreg_tensor{nullptr, 0, -1, nullptr, nullptr};
          at += 8;
          break;
        }
        uint32_t region = read<uint32_t>(at + 8);
        const uint32_t region_flags = region == kNoRegion ? 0 : region & ~kRegionBits;
        const uint32_t guards = region_flags & (kGuardAfter | kGuardBefore);
        if (region != kNoRegion) region &= kRegionBits;
        const uint64_t offset = read<uint64_t>(at + 12);
        const int64_t numel = read<int64_t>(at + 20);
        at += 28;
        std::vector<int64_t>& dims = l.dims[i];
        dims.resize(2 * ndim + 1);
        std::memcpy(dims.data(), at, 16 * ndim);  // copied: aligned for the launcher
        at += 16 * ndim;
        void* data = nullptr;
        if (region != kNoRegion) {
          auto found = regions.find(region);
          if (found == regions.end()) {
            return reply_text('E', ("the isolated worker has no region " + std::to_string(region)).c_str());
          }
          data = reinterpret_cast<void*>(found->second.base + offset);
          const uintptr_t start = reinterpret_cast<uintptr_t>(data);
          const uintptr_t end = start + static_cast<uintptr_t>(numel * l.item_sizes[i]);
          call_tensors[tensors++] = CallTensor{static_cast<int>(i), region, start, end};
          if ((guards & kGuardAfter) && end > start) {
            zones[zone_count++] = GuardZone{end, kZone, static_cast<int>(i), "after", false};
          }
          if ((guards & kGuardBefore) && end > start) {
            zones[zone_count++] = GuardZone{start - kZone, kZone, static_cast<int>(i), "before", false};
          }
          if ((region_flags & kWatch) && end > start) {
            zone_count = watch_zones(zones, zone_count, static_cast<int>(i), start, end, found->second);
          }
        }
        v.tensor = kreg_tensor{data, numel, ndim, dims.data(), dims.data() + ndim};
        break;
      }
      case 'f': v.f64 = read<float>(at); at += 4; break;
      case 'd': v.f64 = read<double>(at); at += 8; break;
      case 'i': v.i64 = read<int64_t>(at); at += 8; break;
      case 'b': v.b = *at != 0; at += 1; break;
      case 's': v.dtype = read<int32_t>(at); at += 4; break;
      case 'l': {
        const int64_t count = read<int64_t>(at);
        std::vector<int64_t>& items = l.dims[i];
        items.resize(count + 1);
        std::memcpy(items.data(), at + 8, 8 * count);
        at += 8 + 8 * count;
        v.list = kreg_int_list{items.data(), count};
        break;
      }
      default: return reply_text('E', "the isolated worker got a parameter kind it does not know");
    }
    if (at > stop) return reply_text('E', "the isolated worker got a call message shorter than its launcher's");
  }
  call_tensor_count = tensors;
  zone_count = drop_shared_zones(zones, zone_count, call_tensors, tensors);
  if (zone_count > 0) {
    if (const char* failed = arm_zones(zones, zone_count)) return reply_text('E', failed);
  }
  in_call = 1;
  const char* error = l.entry(l.launcher, values, cuda.stream, l.wide);
  in_call = 0;
  if (cuda.stream_query != nullptr) {
    // What the zones hold once the kernel ran, copied in the stream's order.
    int result = 0;
    for (int k = 0; k < zone_count && result == 0; ++k) {
      result = cuda.copy_to_host(pinned_slot(1 + k), zones[k].at, zones[k].size, cuda.stream);
    }
    if (result == 0) result = finish_stream();
    if (result != 0) {
      context_lost = true;
      return reply_text('F', cuda_error_text(result).c_str());
    }
    int broken = -1;
    for (int k = 0; k < zone_count; ++k) {
      const GuardZone& z = zones[k];
      const uint8_t* expected = z.watched ? pinned_slot(1 + kMaxZones + k) : pinned_slot(0);
      if (std::memcmp(pinned_slot(1 + k), expected, z.size) == 0) continue;
      if (broken < 0) broken = k;
      // The neighbour's bytes as they were: the parent's other data survives the overrun.
      if (z.watched && result == 0) result = cuda.copy_to_device(z.at, expected, z.size, cuda.stream);
    }
    if (broken >= 0) {
      if (result == 0) result = finish_stream();
      if (result != 0) {
        context_lost = true;
        return reply_text('F', cuda_error_text(result).c_str());
      }
      return reply_text('G', (std::to_string(zones[broken].index) + " " + zones[broken].side).c_str());
    }
  }
  return error == nullptr ? reply_text('K', nullptr) : reply_text('E', error);
}

// Async-signal-safe: the log line of guard_pages.py's handler.
void write_guard_log(int index, const char* side, const char* access) {
  char line[96];
  size_t n = 0;
  auto add = [&](const char* s) {
    while (*s && n < sizeof line - 1) line[n++] = *s++;
  };
  add(kGuardLog);
  add(" ");
  char digits[12];
  int d = 0;
  unsigned value = static_cast<unsigned>(index);
  do {
    digits[d++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && d < 11);
  while (d > 0 && n < sizeof line - 1) line[n++] = digits[--d];
  add(" ");
  add(side);
  add(" ");
  add(access);
  add("\n");
  ssize_t ignored = write(2, line, n);
  (void)ignored;
}

void on_fault(int signo, siginfo_t* info, void* context) {
  if (!in_call) {  // a call Python runs: guard_pages.py's handler knows it
    if ((previous_action.sa_flags & SA_SIGINFO) && previous_action.sa_sigaction != nullptr) {
      previous_action.sa_sigaction(signo, info, context);
    }
    return;  // SA_RESETHAND: the access runs again and the signal ends the worker
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const auto& [id, r] : regions) {
    const char* side;
    if (r.end <= address && address < r.reserved_end) {
      side = "after";
    } else if (r.reserved <= address && address < r.base) {
      side = "before";
    } else {
      continue;
    }
    const bool after = side[0] == 'a';
    int best = -1;
    intptr_t best_key = 0;
    for (int k = 0; k < call_tensor_count; ++k) {
      const CallTensor& t = call_tensors[k];
      if (t.region != id) continue;
      const intptr_t key = after ? -static_cast<intptr_t>(t.end) : static_cast<intptr_t>(t.start);
      if (best < 0 || key < best_key) {
        best = t.index;
        best_key = key;
      }
    }
    if (best < 0) return;
    const char* access = "access";
#if defined(__x86_64__)
    if (context != nullptr) {
      // Bit 1 of the page fault's error code: a write.
      access = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
    }
#endif
    write_guard_log(best, side, access);
    return;
  }
}

}  // namespace

const char* attach(int fd) {
  static std::string error;
  try {
    ring = CallRing::attach(fd);
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return error.c_str();
  }
}

void add_launcher(uint32_t id, const void* entry, const void* launcher, const char* kinds, const int64_t* item_sizes) {
  if (id == 0) return;
  if (launchers.size() < id) launchers.resize(id);
  Launcher& l = launchers[id - 1];
  l.entry = reinterpret_cast<kreg_entry_fn>(const_cast<void*>(entry));
  l.launcher = launcher;
  l.kinds = kinds;
  l.item_sizes.assign(item_sizes, item_sizes + l.kinds.size());
  l.wide = l.kinds.find('d') != std::string::npos;
}

void add_region(uint32_t id, uintptr_t base, uintptr_t end, uintptr_t reserved, uintptr_t reserved_end) {
  regions[id] = Region{base, end, reserved, reserved_end};
}

void drop_region(uint32_t id) { regions.erase(id); }

void serve(int64_t spin_ns) {
  for (;;) {
    uint32_t kind = 0, bytes = 0;
    ring.next_request(spin_ns, &kind, &bytes);
    if (kind != kRequestCall) {
      ring.finish(0);
      return;
    }
    ring.finish(run_call(bytes));
    if (context_lost) _exit(3);  // as worker.py after a device fault: the parent starts a new worker
  }
}

void set_cuda(void* stream, const void* stream_query, const void* stream_synchronize, const void* error_name,
              const void* error_string, const void* copy_to_device, const void* copy_to_host,
              const void* alloc_host) {
  cuda.stream = stream;
  cuda.copy_to_device = reinterpret_cast<int (*)(uint64_t, const void*, size_t, void*)>(const_cast<void*>(copy_to_device));
  cuda.copy_to_host = reinterpret_cast<int (*)(void*, uint64_t, size_t, void*)>(const_cast<void*>(copy_to_host));
  cuda.alloc_host = reinterpret_cast<int (*)(void**, size_t)>(const_cast<void*>(alloc_host));
  cuda.stream_query = reinterpret_cast<int (*)(void*)>(const_cast<void*>(stream_query));
  cuda.stream_synchronize = reinterpret_cast<int (*)(void*)>(const_cast<void*>(stream_synchronize));
  cuda.error_name = reinterpret_cast<int (*)(int, const char**)>(const_cast<void*>(error_name));
  cuda.error_string = reinterpret_cast<int (*)(int, const char**)>(const_cast<void*>(error_string));
}

void install_fault_handler() {
  if (handler_installed) return;
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSEGV, &action, &previous_action) == 0) handler_installed = true;
}

}  // namespace kreg::ring_worker
