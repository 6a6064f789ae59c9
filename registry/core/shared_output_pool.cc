#include "shared_output_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace kreg {
namespace {

int64_t rounded_size(int64_t nbytes) {
  int64_t size = SharedOutputPool::kMinBytes;
  while (size < nbytes) size *= 2;
  return size;
}

void unmap(const SharedSegment& segment) {
  ::munmap(reinterpret_cast<void*>(segment.base), static_cast<size_t>(segment.size));
  ::close(segment.fd);
}

}  // namespace

SharedOutputPool::~SharedOutputPool() {
  for (const Slot& slot : slots_) unmap(slot.segment);
}

void* SharedOutputPool::allocate(int64_t nbytes) {
  if (nbytes < kMinBytes) return nullptr;
  const int64_t size = rounded_size(nbytes);
  std::lock_guard<std::mutex> hold(mutex_);
  for (Slot& slot : slots_) {
    if (!slot.in_use && slot.segment.size == size) {
      slot.in_use = true;
      return reinterpret_cast<void*>(slot.segment.base);
    }
  }
  const int fd = ::memfd_create("kreg-output", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (::ftruncate(fd, size) != 0) {
    ::close(fd);
    return nullptr;
  }
  void* base = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  Slot slot;
  slot.segment = SharedSegment{++next_id_, fd, reinterpret_cast<uintptr_t>(base), size};
  slot.in_use = true;
  slots_.push_back(slot);
  return base;
}

void SharedOutputPool::release(void* pointer) {
  std::lock_guard<std::mutex> hold(mutex_);
  for (Slot& slot : slots_) {
    if (slot.segment.base == reinterpret_cast<uintptr_t>(pointer) && slot.in_use) {
      slot.in_use = false;
      slot.released_at = ++clock_;
      retire_over_cap();
      return;
    }
  }
}

void SharedOutputPool::retire_over_cap() {
  for (;;) {
    int64_t free_bytes = 0;
    Slot* oldest = nullptr;
    for (Slot& slot : slots_) {
      if (slot.in_use) continue;
      free_bytes += slot.segment.size;
      // The latest released is kept whatever its size: a loop's next call reuses it.
      if (slot.released_at != clock_ && (oldest == nullptr || slot.released_at < oldest->released_at)) {
        oldest = &slot;
      }
    }
    if (free_bytes <= kRetainedFreeBytes || oldest == nullptr) return;
    unmap(oldest->segment);
    retired_.push_back(oldest->segment.id);
    slots_.erase(slots_.begin() + (oldest - slots_.data()));
  }
}

std::optional<SharedSegment> SharedOutputPool::segment_of(uintptr_t address, int64_t nbytes) const {
  std::lock_guard<std::mutex> hold(mutex_);
  for (const Slot& slot : slots_) {
    const SharedSegment& s = slot.segment;
    if (slot.in_use && address >= s.base && nbytes >= 0 &&
        address + static_cast<uint64_t>(nbytes) <= s.base + static_cast<uint64_t>(s.size)) {
      return s;
    }
  }
  return std::nullopt;
}

bool SharedOutputPool::has_retired() const {
  std::lock_guard<std::mutex> hold(mutex_);
  return !retired_.empty();
}

std::vector<int64_t> SharedOutputPool::take_retired() {
  std::lock_guard<std::mutex> hold(mutex_);
  std::vector<int64_t> out;
  out.swap(retired_);
  return out;
}

int64_t SharedOutputPool::mapped_bytes() const {
  std::lock_guard<std::mutex> hold(mutex_);
  int64_t total = 0;
  for (const Slot& slot : slots_) total += slot.segment.size;
  return total;
}

SharedOutputPool& shared_output_pool() {
  static SharedOutputPool* pool = new SharedOutputPool();  // never destroyed: tensors may outlive static destructors
  return *pool;
}

}  // namespace kreg

extern "C" void* kreg_shared_output_allocate(int64_t nbytes) {
  return kreg::shared_output_pool().allocate(nbytes);
}

extern "C" void kreg_shared_output_release(void* pointer) { kreg::shared_output_pool().release(pointer); }
