#include "shared_output_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

namespace kreg {
namespace {

TEST(SharedOutputPoolTest, AnAllocationIsSharedMemoryAnotherMappingSees) {
  SharedOutputPool pool;
  char* p = static_cast<char*>(pool.allocate(100000));
  ASSERT_NE(p, nullptr);
  std::optional<SharedSegment> segment = pool.segment_of(reinterpret_cast<uintptr_t>(p) + 10, 1000);
  ASSERT_TRUE(segment.has_value());
  EXPECT_EQ(segment->base, reinterpret_cast<uintptr_t>(p));
  EXPECT_EQ(segment->size, 128 * 1024);  // a power of two from 64 KiB
  // What a worker does with the fd: map it and write; this side sees the bytes.
  void* other = ::mmap(nullptr, segment->size, PROT_READ | PROT_WRITE, MAP_SHARED, segment->fd, 0);
  ASSERT_NE(other, MAP_FAILED);
  std::memcpy(other, "written by the worker", 22);
  EXPECT_STREQ(p, "written by the worker");
  ::munmap(other, segment->size);
  EXPECT_FALSE(pool.segment_of(reinterpret_cast<uintptr_t>(p) + segment->size - 4, 8).has_value());  // past its end
}

TEST(SharedOutputPoolTest, AReleasedSegmentIsReusedForASimilarSize) {
  SharedOutputPool pool;
  void* first = pool.allocate(200000);
  const int64_t id = pool.segment_of(reinterpret_cast<uintptr_t>(first), 1)->id;
  pool.release(first);
  EXPECT_FALSE(pool.segment_of(reinterpret_cast<uintptr_t>(first), 1).has_value());  // not in use: not an output's
  void* again = pool.allocate(250000);  // the same power of two
  EXPECT_EQ(again, first);
  EXPECT_EQ(pool.segment_of(reinterpret_cast<uintptr_t>(again), 1)->id, id);
  void* another = pool.allocate(250000);  // the first is in use: a new segment
  EXPECT_NE(another, first);
  EXPECT_EQ(pool.mapped_bytes(), 2 * 256 * 1024);
}

TEST(SharedOutputPoolTest, ReleasedSegmentsBeyondTheCapAreUnmappedAndReported) {
  SharedOutputPool pool;
  const int64_t big = SharedOutputPool::kRetainedFreeBytes;  // one of these fills the cap by itself
  void* a = pool.allocate(big);
  void* b = pool.allocate(big / 2);
  const int64_t a_id = pool.segment_of(reinterpret_cast<uintptr_t>(a), 1)->id;
  pool.release(a);  // exactly the cap: kept
  EXPECT_TRUE(pool.take_retired().empty());
  pool.release(b);  // over it: the oldest released (a) goes
  EXPECT_EQ(pool.take_retired(), std::vector<int64_t>{a_id});
  EXPECT_TRUE(pool.take_retired().empty());
  EXPECT_EQ(pool.mapped_bytes(), big / 2);
}

TEST(SharedOutputPoolTest, TheLatestReleasedIsKeptWhateverItsSize) {
  SharedOutputPool pool;
  void* huge = pool.allocate(2 * SharedOutputPool::kRetainedFreeBytes);
  pool.release(huge);  // over the cap alone, but a loop's next output of this size reuses it
  EXPECT_TRUE(pool.take_retired().empty());
  EXPECT_EQ(pool.allocate(2 * SharedOutputPool::kRetainedFreeBytes), huge);
}

TEST(SharedOutputPoolTest, NothingForNothingAndUnknownPointersAreIgnored) {
  SharedOutputPool pool;
  EXPECT_EQ(pool.allocate(0), nullptr);
  EXPECT_EQ(pool.allocate(SharedOutputPool::kMinBytes - 1), nullptr);  // staged: a copy costs less
  int local = 0;
  pool.release(&local);
  EXPECT_EQ(pool.mapped_bytes(), 0);
}

}  // namespace
}  // namespace kreg
