// The worker's CUDA canaries (ring_worker.cc, call_message.h) on a machine
// without a GPU: the driver entries it is given are stand-ins over host
// memory, so the "device" region is a plain buffer and the stream is in order
// by construction. What is checked is the worker's part: which zones a
// call message's flags name, that the canary is there before the launch and
// read back after it, that a watched neighbour is put back as it was, and
// the G reply.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../include/kreg/abi.h"
#include "call_message.h"
#include "call_ring.h"
#include "ring_worker.h"

namespace kreg {
namespace {

using call_message::kGuardAfter;
using call_message::kGuardBefore;
using call_message::kWatch;
using call_message::kZone;

int query(void*) { return 0; }  // every "stream" has finished
int copy_to_device(uint64_t to, const void* from, size_t n, void*) {
  std::memcpy(reinterpret_cast<void*>(to), from, n);
  return 0;
}
int copy_to_host(void* to, uint64_t from, size_t n, void*) {
  std::memcpy(to, reinterpret_cast<const void*>(from), n);
  return 0;
}
int alloc_host(void** p, size_t n) {
  *p = std::malloc(n);
  return *p != nullptr ? 0 : 2;
}

// launcher(out, x, k): out[i] = 2 x[i] for i < numel, then k more elements
// past out's end; with k < 0, -k elements before its start.
int64_t g_past = 0;
bool g_look_for_canary = true;  // false where out ends at the region's end
bool g_saw_canary = false;
const char* entry(const void*, const kreg_value* values, void*, int32_t) {
  float* out = static_cast<float*>(values[0].tensor.data);
  const float* x = static_cast<const float*>(values[1].tensor.data);
  const int64_t n = values[0].tensor.numel;
  uint8_t canary[kZone];
  for (int i = 0; i < kZone; ++i) canary[i] = call_message::canary_byte(i);
  g_saw_canary = g_look_for_canary && std::memcmp(out + n, canary, kZone) == 0;  // armed before the launch
  for (int64_t i = 0; i < n; ++i) out[i] = 2 * x[i];
  for (int64_t i = 0; i < g_past; ++i) out[n + i] = 1.0f;
  for (int64_t i = 1; i <= -g_past; ++i) out[-i] = 1.0f;
  return nullptr;
}

class WorkerGuards : public ::testing::Test {
 protected:
  void SetUp() override {
    ring_worker::set_cuda(this, reinterpret_cast<const void*>(&query), reinterpret_cast<const void*>(&query), nullptr,
                          nullptr, reinterpret_cast<const void*>(&copy_to_device),
                          reinterpret_cast<const void*>(&copy_to_host), reinterpret_cast<const void*>(&alloc_host));
    ASSERT_EQ(ring_worker::attach(dup(parent.fd())), nullptr);
    const char kinds[] = "TT";
    const int64_t item_sizes[] = {4, 4};
    ring_worker::add_launcher(1, reinterpret_cast<const void*>(&entry), nullptr, kinds, item_sizes);
    memory.assign(4096, 0);
    const uintptr_t base = reinterpret_cast<uintptr_t>(memory.data());
    ring_worker::add_region(7, base, base + memory.size(), base, base + memory.size());
    serving = std::thread([] { ring_worker::serve(1000); });
  }
  void TearDown() override {
    parent.post(kRequestYield, 0);
    ASSERT_EQ(parent.wait_for_reply(5'000'000'000), WaitResult::kReady);
    serving.join();
    ring_worker::drop_region(7);
    ring_worker::set_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  }

  // A call of out (256 floats at out_at, flagged) and x (256 floats at x_at): the reply.
  std::string call(uint32_t out_flags, uint64_t out_at = 1024, uint64_t x_at = 3072) {
    uint8_t* m = parent.request();
    size_t at = 0;
    auto put = [&](const auto& v) {
      std::memcpy(m + at, &v, sizeof v);
      at += sizeof v;
    };
    put('C');
    put(uint32_t{1});
    for (const auto& [region, offset] : {std::pair<uint32_t, uint64_t>{7u | out_flags, out_at}, {7u, x_at}}) {
      put(int64_t{1});
      put(region);
      put(offset);
      put(int64_t{256});
      put(int64_t{256});  // size
      put(int64_t{1});    // stride
    }
    parent.post(kRequestCall, static_cast<uint32_t>(at));
    EXPECT_EQ(parent.wait_for_reply(5'000'000'000), WaitResult::kReady);
    return std::string(reinterpret_cast<const char*>(parent.reply()), parent.header()->reply_bytes);
  }

  CallRing parent = CallRing::create();
  std::vector<uint8_t> memory;
  std::thread serving;
};

TEST_F(WorkerGuards, AWriteOnePastAGuardedOutputIsReplied) {
  g_past = 1;
  EXPECT_EQ(call(kGuardAfter), "G0 after");
  EXPECT_TRUE(g_saw_canary);
}

TEST_F(WorkerGuards, AWriteBeforeAStagedOutputIsReplied) {
  g_past = -2;
  EXPECT_EQ(call(kGuardAfter | kGuardBefore), "G0 before");
}

TEST_F(WorkerGuards, ACallInBoundsIsDone) {
  g_past = 0;
  EXPECT_EQ(call(kGuardAfter | kGuardBefore), "K");
  EXPECT_TRUE(g_saw_canary);
}

TEST_F(WorkerGuards, AnUnflaggedTensorIsNotGuarded) {
  g_past = 3;  // lands in memory no flag claims: the worker must not look there
  EXPECT_EQ(call(0), "K");
}

// Watched (an argument written in place): its neighbours are other data.
constexpr uint8_t kNeighbour = 0x5A;

TEST_F(WorkerGuards, AWriteOnePastAWatchedTensorIsRepliedAndItsNeighbourPutBack) {
  std::memset(memory.data(), kNeighbour, memory.size());
  g_past = 1;
  EXPECT_EQ(call(kWatch), "G0 after");
  for (int i = 0; i < kZone; ++i) EXPECT_EQ(memory[2048 + i], kNeighbour) << i;
}

TEST_F(WorkerGuards, AWriteBeforeAWatchedTensorIsRepliedAndItsNeighbourPutBack) {
  std::memset(memory.data(), kNeighbour, memory.size());
  g_past = -3;
  EXPECT_EQ(call(kWatch), "G0 before");
  for (int i = 1; i <= kZone; ++i) EXPECT_EQ(memory[1024 - i], kNeighbour) << i;
}

TEST_F(WorkerGuards, AWatchedCallInBoundsIsDoneAndTouchesNoNeighbour) {
  std::memset(memory.data(), kNeighbour, memory.size());
  g_past = 0;
  EXPECT_EQ(call(kWatch), "K");
  EXPECT_EQ(memory[1023], kNeighbour);
  EXPECT_EQ(memory[2048], kNeighbour);
}

TEST_F(WorkerGuards, AWatchedZoneThatMeetsAnotherTensorOfTheCallIsNotWatched) {
  g_past = 1;  // into x, which starts at out's end: the kernel may write its arguments
  EXPECT_EQ(call(kWatch, 1024, 2048), "K");
}

TEST_F(WorkerGuards, AWatchedTensorAtTheRegionsEndIsWatchedOnlyWithinIt) {
  // out ends where the region does: nothing past it is read (the sanitizer
  // build would see a read past `memory`), the zone before it still is.
  g_look_for_canary = false;
  g_past = 0;
  EXPECT_EQ(call(kWatch, 3072, 0), "K");
  g_past = -1;
  EXPECT_EQ(call(kWatch, 3072, 0), "G0 before");
  g_look_for_canary = true;
}

}  // namespace
}  // namespace kreg
