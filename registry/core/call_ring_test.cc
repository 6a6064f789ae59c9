#include "call_ring.h"

#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace kreg {
namespace {

// The worker's side on a thread, over a second mapping of the same memfd (as the worker process maps it).
TEST(CallRing, RequestsAndRepliesCrossTheMapping) {
  CallRing parent = CallRing::create();
  CallRing worker = CallRing::attach(dup(parent.fd()));
  std::thread serve([&] {
    for (;;) {
      uint32_t kind = 0, bytes = 0;
      worker.next_request(1000, &kind, &bytes);  // a short spin: most requests find it asleep
      if (kind == kRequestYield) {
        worker.finish(0);
        return;
      }
      std::memcpy(worker.reply(), worker.request(), bytes);
      worker.reply()[0] ^= 1;
      worker.finish(bytes);
    }
  });
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(parent.idle());
    const uint32_t value = static_cast<uint32_t>(i);
    std::memcpy(parent.request(), &value, sizeof value);
    parent.post(kRequestCall, sizeof value);
    if (i % 2 == 0 || !parent.spin_for_reply(100)) {
      ASSERT_EQ(parent.wait_for_reply(5'000'000'000), WaitResult::kReady) << i;
    }
    uint32_t back = 0;
    std::memcpy(&back, parent.reply(), sizeof back);
    ASSERT_EQ(back, value ^ 1u);
    ASSERT_EQ(parent.header()->reply_bytes, sizeof value);
  }
  parent.post(kRequestYield, 0);
  ASSERT_EQ(parent.wait_for_reply(5'000'000'000), WaitResult::kReady);
  serve.join();
}

TEST(CallRing, AWaitWithoutAReplyTimesOut) {
  CallRing parent = CallRing::create();
  parent.post(kRequestCall, 0);
  EXPECT_FALSE(parent.spin_for_reply(1000));
  EXPECT_EQ(parent.wait_for_reply(2'000'000), WaitResult::kTimedOut);
  EXPECT_FALSE(parent.idle());
}

TEST(CallRing, AttachRefusesAnotherLayout) {
  CallRing parent = CallRing::create();
  parent.header()->version = kCallRingVersion + 1;
  EXPECT_THROW(CallRing::attach(dup(parent.fd())), std::runtime_error);
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

TEST(SpinPolicy, HalvesAfterMissesRestoresOnACatchAndProbesAtTheFloor) {
  SpinPolicy policy(64000);
  EXPECT_EQ(policy.next(), 64000);
  for (int64_t expected : {32000, 16000, 8000, 4000, 2000, 2000}) {
    policy.done(false);
    EXPECT_EQ(policy.budget_ns(), expected);
  }
  int probes = 0;
  for (int i = 0; i < 2 * SpinPolicy::kProbeEvery; ++i) {
    const int64_t spin = policy.next();
    probes += spin == 64000;
    EXPECT_TRUE(spin == 64000 || spin == SpinPolicy::kMinSpinNs);
    policy.done(false);
  }
  EXPECT_EQ(probes, 2);
  policy.done(true);
  EXPECT_EQ(policy.next(), 64000);
}

}  // namespace
}  // namespace kreg

namespace kreg {
namespace {

// The parent may post before the worker has mapped the channel: the request is pending for it.
TEST(CallRing, ARequestPostedBeforeTheWorkerAttachesIsServed) {
  CallRing parent = CallRing::create();
  parent.post(kRequestYield, 0);
  CallRing worker = CallRing::attach(dup(parent.fd()));
  std::thread serve([&] {
    uint32_t kind = 0, bytes = 0;
    worker.next_request(1000, &kind, &bytes);
    EXPECT_EQ(kind, kRequestYield);
    worker.finish(0);
  });
  const WaitResult result = parent.wait_for_reply(2'000'000'000);
  if (result != WaitResult::kReady) parent.post(kRequestYield, 0);  // frees a worker that missed the first
  serve.join();
  EXPECT_EQ(result, WaitResult::kReady);
}

// The worker reads parent_asleep when it finishes a request and may issue its
// FUTEX_WAKE late, into the parent's wait for the next one: that wake must not
// end the wait (it once did, as a timeout, on a loaded 2-core machine).
TEST(CallRing, AWakeWithoutTheReplyDoesNotEndTheWait) {
  CallRing parent = CallRing::create();
  CallRing worker = CallRing::attach(dup(parent.fd()));
  parent.post(kRequestCall, 0);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&parent.header()->reply_seq), FUTEX_WAKE, 1, nullptr, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    uint32_t kind = 0, bytes = 0;
    worker.next_request(1000, &kind, &bytes);
    worker.finish(0);
  });
  const auto start = std::chrono::steady_clock::now();
  const WaitResult result = parent.wait_for_reply(5'000'000'000);
  const auto waited = std::chrono::steady_clock::now() - start;
  late.join();
  EXPECT_EQ(result, WaitResult::kReady);
  EXPECT_GE(waited, std::chrono::milliseconds(45));
}

}  // namespace
}  // namespace kreg
