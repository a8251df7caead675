// ResidentBlock: the owner says what it wants, a caller provides it, the
// owner takes it; sizes that do not match are never handed over, and a
// block is freed exactly once whichever way it ends.
#include "timingwheel/internal/base/resident_block.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "timingwheel/internal/base/large_alloc.h"

namespace timingwheel {
namespace internal {
namespace {

constexpr std::size_t kSmall = 64 << 10;
constexpr std::size_t kLarge = std::size_t{4} << 20;

TEST(ResidentBlock, NothingIsWantedOrReadyAtFirst) {
  ResidentBlock block;
  EXPECT_FALSE(block.Wanted());
  EXPECT_EQ(block.ReadyBytes(), 0u);
  block.Provide();  // nothing wanted: does nothing
  EXPECT_EQ(block.Take(kSmall, 8), nullptr);
}

TEST(ResidentBlock, WantProvideTake) {
  ResidentBlock block;
  block.Want(kLarge, 16);
  EXPECT_TRUE(block.Wanted());
  EXPECT_EQ(block.Take(kLarge, 16), nullptr);  // not provided yet
  block.Provide();
  EXPECT_FALSE(block.Wanted());
  EXPECT_EQ(block.ReadyBytes(), kLarge);
  EXPECT_EQ(block.Take(kSmall, 16), nullptr);  // another size: not handed
  EXPECT_EQ(block.Take(kLarge, 8), nullptr);   // another alignment either
  void* p = block.Take(kLarge, 16);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(block.ReadyBytes(), 0u);
  EXPECT_EQ(block.Take(kLarge, 16), nullptr);  // handed over once
  std::memset(p, 0xAB, kLarge);                // all of it is the owner's
  LargeFree(p, kLarge, 16);
}

// A want of another size replaces a ready block (freed: ASan would report
// a leak otherwise) or a wanted one; the same size keeps the ready one.
TEST(ResidentBlock, AnotherWantReplacesTheBlock) {
  ResidentBlock block;
  block.Want(kSmall, 8);
  block.Provide();
  block.Want(kSmall, 8);
  EXPECT_EQ(block.ReadyBytes(), kSmall);  // kept
  block.Want(kLarge, 8);
  EXPECT_EQ(block.ReadyBytes(), 0u);
  EXPECT_TRUE(block.Wanted());
  block.Want(kSmall, 8);  // a wanted one changes its mind
  block.Provide();
  EXPECT_EQ(block.ReadyBytes(), kSmall);
  void* p = block.Take(kSmall, 8);
  ASSERT_NE(p, nullptr);
  LargeFree(p, kSmall, 8);
}

TEST(ResidentBlock, DropFreesAReadyBlockAndWithdrawsAWant) {
  ResidentBlock block;
  block.Want(kSmall, 8);
  block.Drop();
  EXPECT_FALSE(block.Wanted());
  block.Provide();
  EXPECT_EQ(block.ReadyBytes(), 0u);
  block.Want(kSmall, 8);
  block.Provide();
  block.Drop();
  EXPECT_EQ(block.ReadyBytes(), 0u);
  EXPECT_EQ(block.Take(kSmall, 8), nullptr);
}

// Many callers race to provide while the owner wants and takes: every
// block is provided by one caller and taken once (ThreadSanitizer checks
// the hand-over), and the destructor frees what is left.
TEST(ResidentBlock, CallersRaceToProvide) {
  ResidentBlock block;
  std::atomic<bool> done{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed)) {
        if (block.Wanted()) block.Provide();
        std::this_thread::yield();
      }
    });
  }
  int taken = 0;
  for (int round = 0; round < 200; ++round) {
    const std::size_t bytes = round % 3 == 0 ? kLarge : kSmall;
    block.Want(bytes, 16);
    // Until a caller provides it: generous, for sanitizers on a busy CI.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < give_up) {
      if (void* p = block.Take(bytes, 16)) {
        static_cast<unsigned char*>(p)[bytes - 1] = 1;
        LargeFree(p, bytes, 16);
        ++taken;
        break;
      }
      std::this_thread::yield();
    }
  }
  block.Want(kSmall, 16);  // left for the destructor, maybe ready
  done.store(true);
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(taken, 200);
}

// A posted range is populated by one caller, its bytes untouched; a new
// post replaces one nobody took.
TEST(ResidentRange, PostThenPopulateChangesNoByte) {
  ResidentRange range;
  EXPECT_FALSE(range.Posted());
  range.Populate();  // nothing posted: does nothing
  std::vector<unsigned char> a(kLarge, 5), b(kSmall, 6);
  range.Post(a.data(), a.size());
  range.Post(b.data(), b.size());  // replaces
  EXPECT_TRUE(range.Posted());
  range.Populate();
  EXPECT_FALSE(range.Posted());
  EXPECT_EQ(a[0], 5);
  EXPECT_EQ(a[kLarge - 1], 5);
  EXPECT_EQ(b[kSmall - 1], 6);
}

// Callers populate while the owner writes the range and posts others:
// faulting in races with nothing (ThreadSanitizer checks the hand-over of
// the request), and every byte the owner wrote stays.
TEST(ResidentRange, CallersPopulateWhileTheOwnerWrites) {
  ResidentRange range;
  std::atomic<bool> done{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed)) {
        if (range.Posted()) range.Populate();
        std::this_thread::yield();
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    void* p = LargeAllocate(kLarge, 8);
    range.Post(p, kLarge);
    auto* bytes = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < kLarge; i += 4096) bytes[i] = 1;
    for (std::size_t i = 0; i < kLarge; i += 4096) ASSERT_EQ(bytes[i], 1);
    while (range.Posted()) std::this_thread::yield();
    LargeFree(p, kLarge, 8);
  }
  done.store(true);
  for (std::thread& t : callers) t.join();
}

TEST(MakeResident, TouchesEveryPageAndKeepsTheBlockUsable) {
  constexpr std::size_t kBytes = (std::size_t{2} << 20) + 12345;
  void* p = LargeAllocate(kBytes, 8);
  MakeResident(p, kBytes);
  std::memset(p, 7, kBytes);
  EXPECT_EQ(static_cast<unsigned char*>(p)[kBytes - 1], 7);
  LargeFree(p, kBytes, 8);
  MakeResident(nullptr, 0);  // nothing to do
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
