#include "call_ring.h"

#include <errno.h>
#include <sched.h>  // sched_yield, sched_getcpu (_GNU_SOURCE)
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace kreg {
namespace {

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Shared (not FUTEX_PRIVATE): the two sides are two processes.
long futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec t{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, timeout_ns < 0 ? nullptr : &t,
                 nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

// Spins until `done` or spin_ns have passed (the clock read every 64 turns:
// ~20 ns each). After the first kBusySpinNs it yields the core on every turn:
// on a machine with more runnable threads than cores, the other side may be
// waiting for this very core, and a pure spin only delays it.
constexpr int64_t kBusySpinNs = 2000;

// Records this side's core in `mine`; true when `other` last waited on it too.
bool shares_core(std::atomic<uint32_t>& mine, const std::atomic<uint32_t>& other) {
  const int cpu = sched_getcpu();
  if (cpu < 0) return false;
  mine.store(static_cast<uint32_t>(cpu) + 1, std::memory_order_relaxed);  // 0: not known yet
  return other.load(std::memory_order_relaxed) == static_cast<uint32_t>(cpu) + 1;
}

template <typename Done>
bool spin(int64_t spin_ns, Done done, bool yield_at_once) {
  if (done()) return true;
  const int64_t start = now_ns(), until = start + spin_ns;
  bool yielding = yield_at_once;
  for (unsigned turn = 1;; ++turn) {
    if (done()) return true;
    if (yielding) {
      sched_yield();
      if (now_ns() > until) return done();
      continue;
    }
    relax();
    if ((turn & 63) == 0) {
      const int64_t now = now_ns();
      if (now > until) return done();
      yielding = now - start > kBusySpinNs;
    }
  }
}

std::string error_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

CallRing CallRing::create() {
  CallRing ring;
  ring.fd_ = memfd_create("kreg-call-ring", MFD_CLOEXEC);
  if (ring.fd_ < 0) throw std::runtime_error(error_text("memfd_create for the isolated call channel"));
  if (ftruncate(ring.fd_, kCallRingBytes) != 0) throw std::runtime_error(error_text("sizing the call channel"));
  void* at = mmap(nullptr, kCallRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring.fd_, 0);
  if (at == MAP_FAILED) throw std::runtime_error(error_text("mapping the call channel"));
  ring.header_ = new (at) CallRingHeader{};
  ring.header_->magic = kCallRingMagic;
  ring.header_->version = kCallRingVersion;
  ring.header_->size = static_cast<uint32_t>(kCallRingBytes);
  return ring;
}

CallRing CallRing::attach(int fd) {
  CallRing ring;
  void* at = mmap(nullptr, kCallRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (at == MAP_FAILED) throw std::runtime_error(error_text("mapping the call channel"));
  ring.fd_ = fd;
  ring.header_ = static_cast<CallRingHeader*>(at);
  if (ring.header_->magic != kCallRingMagic || ring.header_->version != kCallRingVersion) {
    throw std::runtime_error("the call channel's layout is not version " + std::to_string(kCallRingVersion) +
                             " (parent and worker come from different registry versions)");
  }
  // The last request done, not the last posted: the parent may post before the
  // worker attaches (its messages queue on the socket), and that request is pending.
  ring.seen_ = ring.header_->reply_seq.load();
  return ring;
}

CallRing::CallRing(CallRing&& other) noexcept { *this = std::move(other); }

CallRing& CallRing::operator=(CallRing&& other) noexcept {
  if (this != &other) {
    if (header_ != nullptr) munmap(header_, kCallRingBytes);
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    header_ = other.header_;
    seen_ = other.seen_;
    spin_ = other.spin_;
    spin_max_ns_ = other.spin_max_ns_;
    wakes_ = other.wakes_;
    other.fd_ = -1;
    other.header_ = nullptr;
  }
  return *this;
}

CallRing::~CallRing() {
  if (header_ != nullptr) munmap(header_, kCallRingBytes);
  if (fd_ >= 0) close(fd_);
  header_ = nullptr;
  fd_ = -1;
}

bool CallRing::idle() const { return header_->reply_seq.load() == header_->request_seq.load(); }

void CallRing::post(uint32_t kind, uint32_t bytes) {
  header_->request_kind = kind;
  header_->request_bytes = bytes;
  header_->request_seq.fetch_add(1);  // seq_cst: ordered before reading worker_asleep
  if (header_->worker_asleep.load()) {
    futex_wake(&header_->request_seq);
    ++wakes_;
  }
}

bool CallRing::spin_for_reply(int64_t max_spin_ns) {
  if (max_spin_ns != spin_max_ns_) spin_.set_max(spin_max_ns_ = max_spin_ns);
  const uint32_t expected = header_->request_seq.load(std::memory_order_relaxed);
  const bool caught = spin(spin_.next(), [&] { return header_->reply_seq.load(std::memory_order_acquire) == expected; },
                           shares_core(header_->parent_cpu, header_->worker_cpu));
  spin_.done(caught);
  return caught;
}

WaitResult CallRing::wait_for_reply(int64_t timeout_ns) {
  const uint32_t expected = header_->request_seq.load(std::memory_order_relaxed);
  if (header_->reply_seq.load() == expected) return WaitResult::kReady;
  const int64_t until = now_ns() + timeout_ns;
  WaitResult result = WaitResult::kTimedOut;
  header_->parent_asleep.store(1);
  for (;;) {
    const uint32_t seen = header_->reply_seq.load();  // after the flag: a reply finished before it is seen here
    if (seen == expected) break;
    const int64_t left = until - now_ns();
    if (left <= 0) break;
    // A wake may be one the worker meant for an earlier request (it read the
    // flag then, and its FUTEX_WAKE came late): look again until the deadline.
    if (futex_wait(&header_->reply_seq, seen, left) != 0 && errno == EINTR) {
      result = WaitResult::kInterrupted;
      break;
    }
  }
  header_->parent_asleep.store(0);
  return header_->reply_seq.load() == expected ? WaitResult::kReady : result;
}

void CallRing::next_request(int64_t max_spin_ns, uint32_t* kind, uint32_t* bytes) {
  if (max_spin_ns != spin_max_ns_) spin_.set_max(spin_max_ns_ = max_spin_ns);
  auto posted = [&] { return header_->request_seq.load(std::memory_order_acquire) != seen_; };
  const bool caught = spin(spin_.next(), posted, shares_core(header_->worker_cpu, header_->parent_cpu));
  spin_.done(caught);
  while (!caught && !posted()) {
    header_->worker_asleep.store(1);
    const uint32_t now = header_->request_seq.load();
    if (now == seen_) futex_wait(&header_->request_seq, now, -1);  // no timeout: the parent's death kills us
    header_->worker_asleep.store(0);
  }
  seen_ = header_->request_seq.load(std::memory_order_acquire);
  *kind = header_->request_kind;
  *bytes = header_->request_bytes;
}

void CallRing::finish(uint32_t bytes) {
  header_->reply_bytes = bytes;
  header_->reply_seq.store(seen_);  // seq_cst: ordered before reading parent_asleep
  if (header_->parent_asleep.load()) futex_wake(&header_->reply_seq);
}

}  // namespace kreg
