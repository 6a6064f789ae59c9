#include "isolated_call.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "../include/kreg/launcher_table.h"
#include "call_message.h"
#include "shared_output_pool.h"

namespace kreg {
namespace {

using call_message::kGuardAfter;
using call_message::kNoRegion;
using call_message::kWatch;
using call_message::kZone;
constexpr int kMaxParams = KREG_TABLE_MAX_ARGS + KREG_TABLE_MAX_OUTPUTS;

std::mutex channels_mutex;
std::vector<std::shared_ptr<IsolatedChannel>> channels;  // a few at most: one per plain worker

const int64_t kPage = sysconf(_SC_PAGESIZE);

int64_t page_rest(uintptr_t end) { return static_cast<int64_t>((kPage - end % kPage) % kPage); }

struct Staged {
  uintptr_t data;
  int64_t offset;
  int64_t nbytes;
  size_t region_at;  // where the tensor's region id is in the request
  int index;
  char role;
};

struct Zone {
  uintptr_t at;
  int64_t size;
  int index;
  int side;  // 0 after, 1 before
};

// Writes the call into the request area: false where Python must do it.
class Writer {
 public:
  explicit Writer(uint8_t* out) : out_(out) {}
  template <typename T>
  bool put(T value) { return bytes(&value, sizeof value); }
  bool bytes(const void* from, size_t n) {
    if (n == 0) return true;  // a 0-dim tensor's sizes may be null
    if (at_ + n > kRequestCapacity) return false;
    std::memcpy(out_ + at_, from, n);
    at_ += n;
    return true;
  }
  size_t at() const { return at_; }
  uint8_t* out() const { return out_; }

 private:
  uint8_t* out_;
  size_t at_ = 0;
};

// The first of `spans` (each with .base and .end) that holds [data, end), or null.
template <typename Span>
const Span* containing(const std::vector<Span>& spans, uintptr_t data, uintptr_t end) {
  for (const Span& span : spans) {
    if (span.base <= data && end <= span.end) return &span;
  }
  return nullptr;
}

struct Busy {
  std::atomic<bool>& flag;
  ~Busy() { flag.store(false, std::memory_order_release); }
};

}  // namespace

void add_channel(std::shared_ptr<IsolatedChannel> channel) {
  std::lock_guard<std::mutex> hold(channels_mutex);
  channels.push_back(std::move(channel));
}

void drop_channel(uint64_t generation) {
  std::lock_guard<std::mutex> hold(channels_mutex);
  for (auto it = channels.begin(); it != channels.end(); ++it) {
    if ((*it)->generation == generation) {
      channels.erase(it);
      return;
    }
  }
}

std::shared_ptr<IsolatedChannel> channel_of(uint64_t generation) {
  std::lock_guard<std::mutex> hold(channels_mutex);
  for (const auto& channel : channels) {
    if (channel->generation == generation) return channel;
  }
  return nullptr;
}

namespace {

constexpr int kCuPointerAttributeBufferId = 7;  // CU_POINTER_ATTRIBUTE_BUFFER_ID
constexpr int kCudaErrorNotReady = 600;         // CUDA_ERROR_NOT_READY
constexpr int64_t kStreamSpinNs = 20'000'000;   // as cuda_memory.SPIN_SECONDS

// Waits for the parent's stream: what it queued before the call (the inputs)
// is written. Polled first: a blocking wait wakes ~100 us late, an idle gap on
// the device between back-to-back calls. The driver's result.
int wait_for_stream(const IsolatedChannel::CudaDriver& driver, void* stream) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kStreamSpinNs);
  for (;;) {
    const int result = driver.stream_query(stream);
    if (result != kCudaErrorNotReady) return result;
    if (std::chrono::steady_clock::now() > until) return driver.stream_synchronize(stream);
  }
}

// The call, written and sent; nullptr where Python takes it (`*declined`).
const char* fast_call(IsolatedSlot& slot, IsolatedChannel& channel, const kreg_value* values, void* stream,
                      bool* declined) {
  *declined = true;
  CallRing& ring = channel.ring;
  if (!ring.idle() || slot.kinds.size() > static_cast<size_t>(kMaxParams)) return nullptr;
  Writer w(ring.request());
  w.put<char>('C');
  w.put<uint32_t>(slot.launcher_id);
  Staged staged[kMaxParams];
  Zone zones[2 * kMaxParams];
  int staged_count = 0, zone_count = 0;
  int64_t staged_end = 0;  // bytes of the staging buffer this call uses
  SharedOutputPool& pool = shared_output_pool();
  {
    std::lock_guard<std::mutex> hold(channel.tables);
    for (size_t i = 0; i < slot.kinds.size(); ++i) {
      const kreg_value& v = values[i];
      bool ok = true;
      switch (slot.kinds[i]) {
        case 'T': {
          const kreg_tensor& t = v.tensor;
          if (t.ndim < 0) {
            ok = w.put<int64_t>(-1);
            break;
          }
          const uintptr_t data = reinterpret_cast<uintptr_t>(t.data);
          const int64_t nbytes = t.numel * slot.item_sizes[i];
          uint32_t region = kNoRegion;
          int64_t offset = 0, free = 0;
          bool stage = false;
          if (data != 0 && nbytes != 0 && channel.cuda) {
            const auto* found = containing(channel.cuda_allocations, data, data + static_cast<uintptr_t>(nbytes));
            uint64_t buffer_id = 0;
            if (found == nullptr ||
                channel.driver.pointer_get_attribute(&buffer_id, kCuPointerAttributeBufferId, data) != 0 ||
                buffer_id != found->buffer_id) {
              return nullptr;  // memory the worker has not opened (or a new allocation at its address): Python
            }
            region = found->id;
            offset = static_cast<int64_t>(data - found->base);
            // An output the binding allocated has the table's padding after it
            // (proxy.py sets output_padding with the slot): the worker guards it.
            // An argument written in place has other data around it: watched.
            if (slot.roles[i] == 'o') region |= kGuardAfter;
            if (slot.roles[i] == 'm') region |= kWatch;
          } else if (data != 0 && nbytes != 0) {
            const uintptr_t end = data + static_cast<uintptr_t>(nbytes);
            const auto* found = containing(channel.storages, data, end);
            if (found != nullptr) {
              region = found->id;
              offset = static_cast<int64_t>(data - found->base);
              free = end == found->end ? page_rest(end) : 0;
            } else if (nbytes >= SharedOutputPool::kMinBytes) {
              std::optional<SharedSegment> segment = pool.segment_of(data, nbytes);
              if (segment) {
                auto known = channel.pool.find(segment->id);
                if (known == channel.pool.end()) return nullptr;  // its fd goes to the worker first
                region = known->second;
                offset = static_cast<int64_t>(data - segment->base);
                // One output a segment: the rest of a fresh output's segment is free.
                free = slot.roles[i] == 'o' ? static_cast<int64_t>(segment->base + segment->size - end) : 0;
              } else {
                stage = true;
              }
            } else {
              stage = true;
            }
            if (stage) {
              // guards.py's layout: a zone on each side, the data keeping its 64-byte alignment.
              offset = staged_end + kZone + static_cast<int64_t>(data & 63);
              staged_end = (offset + nbytes + kZone + 63) & ~int64_t{63};
              staged[staged_count++] = Staged{data, offset, nbytes, w.at() + 8, static_cast<int>(i), slot.roles[i]};
            } else if (free > 0) {
              zones[zone_count++] = Zone{end, free < kZone ? free : kZone, static_cast<int>(i), 0};
            }
          }
          ok = w.put<int64_t>(t.ndim) && w.put<uint32_t>(region) && w.put<uint64_t>(offset) &&
               w.put<int64_t>(t.numel) && w.bytes(t.sizes, 8 * t.ndim) && w.bytes(t.strides, 8 * t.ndim);
          break;
        }
        case 'f': ok = w.put<float>(static_cast<float>(v.f64)); break;
        case 'd': ok = w.put<double>(v.f64); break;
        case 'i': ok = w.put<int64_t>(v.i64); break;
        case 'b': ok = w.put<uint8_t>(v.b ? 1 : 0); break;
        case 's': ok = w.put<int32_t>(v.dtype); break;
        case 'l': ok = w.put<int64_t>(v.list.size) && w.bytes(v.list.data, 8 * v.list.size); break;
        default: ok = false;
      }
      if (!ok) return nullptr;
    }
    if (staged_count > 0) {
      if (channel.staging_base == 0 || channel.staging_size < staged_end) return nullptr;  // Python grows it
      const uintptr_t base = channel.staging_base;
      for (int k = 0; k < staged_count; ++k) {
        const Staged& s = staged[k];
        std::memcpy(w.out() + s.region_at, &channel.staging_region, sizeof(uint32_t));
        if (s.role != 'o') std::memcpy(reinterpret_cast<void*>(base + s.offset), reinterpret_cast<void*>(s.data), s.nbytes);
        zones[zone_count++] = Zone{base + s.offset - kZone, kZone, s.index, 1};
        zones[zone_count++] = Zone{base + s.offset + s.nbytes, kZone, s.index, 0};
      }
      channel.staged_calls.fetch_add(1, std::memory_order_relaxed);
      int64_t total = 0;
      for (int k = 0; k < staged_count; ++k) total += staged[k].nbytes;
      channel.staged_bytes.fetch_add(total, std::memory_order_relaxed);
    }
  }
  if (channel.cuda && wait_for_stream(channel.driver, stream) != 0) {
    return nullptr;  // the parent's context reports an error: Python's path raises it
  }
  *declined = false;
  for (int k = 0; k < zone_count; ++k) {
    std::memcpy(reinterpret_cast<void*>(zones[k].at), call_message::kCanary.data(), zones[k].size);
  }
  ring.post(kRequestCall, static_cast<uint32_t>(w.at()));
  channel.posts.fetch_add(1, std::memory_order_relaxed);
  if (!ring.spin_for_reply(channel.spin_ns)) {
    // Python waits (the timeout, Ctrl-C, the worker's death); it reports and retires on failure.
    if (slot.slow(kSlowWait, values, 0, 0) != 1) {
      if (!ring.idle()) channel.broken.store(true);  // abandoned in flight (the callback itself failed)
      return slot.fault_text;
    }
  }
  channel.calls.fetch_add(1, std::memory_order_relaxed);
  for (int k = 0; k < zone_count; ++k) {
    if (std::memcmp(reinterpret_cast<void*>(zones[k].at), call_message::kCanary.data(), zones[k].size) != 0) {
      slot.slow(kSlowOverrun, values, zones[k].index, zones[k].side);  // nothing is copied back
      return slot.fault_text;
    }
  }
  for (int k = 0; k < staged_count; ++k) {
    const Staged& s = staged[k];
    if (s.role != 'i') {
      std::memcpy(reinterpret_cast<void*>(s.data), reinterpret_cast<void*>(channel.staging_base + s.offset), s.nbytes);
    }
  }
  const uint8_t* reply = ring.reply();
  const uint32_t reply_bytes = ring.header()->reply_bytes;
  if (reply_bytes >= 1 && reply[0] == 'K') return nullptr;
  if (reply_bytes >= 1 && reply[0] == 'F') {
    slot.slow(kSlowDeviceFault, values, 0, 0);  // Python reads why from the reply and retires the worker
    return slot.fault_text;
  }
  if (reply_bytes >= 2 && reply[0] == 'G') {  // a CUDA worker's canary: "G<index> after|before"
    const std::string text(reinterpret_cast<const char*>(reply) + 1, reply_bytes - 1);
    const size_t space = text.find(' ');
    const int index = std::atoi(text.c_str());
    slot.slow(kSlowOverrun, values, index, space != std::string::npos && text[space + 1] == 'b' ? 1 : 0);
    return slot.fault_text;
  }
  slot.error.assign(reinterpret_cast<const char*>(reply) + (reply_bytes > 0 ? 1 : 0), reply_bytes > 0 ? reply_bytes - 1 : 0);
  return slot.error.c_str();
}

}  // namespace

}  // namespace kreg

extern "C" const char* kreg_isolated_entry(const void* launcher, const kreg_value* values, void* stream,
                                           int32_t wide) {
  using namespace kreg;
  auto& slot = *const_cast<IsolatedSlot*>(static_cast<const IsolatedSlot*>(launcher));
  std::shared_ptr<IsolatedChannel> channel = slot.generation != 0 ? channel_of(slot.generation) : nullptr;
  if (channel && channel->in_ring.load() && !channel->broken.load() &&
      (channel->cuda || !shared_output_pool().has_retired()) &&
      !channel->busy.exchange(true, std::memory_order_acquire)) {
    Busy release{channel->busy};
    bool declined = true;
    const char* result = fast_call(slot, *channel, values, stream, &declined);
    if (!declined) return result;
  }
  // Python's path: the same message, and whatever it must send or set up first.
  return slot.source_entry(slot.fallback, values, stream, wide);
}
