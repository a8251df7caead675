// internal::BacklogKeys and internal::Backlog on one thread: what the loop
// relies on to tick ahead of commands it has taken but not applied. That
// the loop uses them correctly is checked through the wheel's model
// (WheelModelTest.TicksAheadOfABacklogHoldOnlyItsKeys) and under threads
// (Stress.TicksAheadOfAFloodKeepEveryTimerExactlyOnce).
#include "timingwheel/internal/backlog.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"
#include "timingwheel/internal/backlog_keys.h"
#include "timingwheel/internal/command.h"

namespace timingwheel {
namespace internal {
namespace {

using Cmd = Command<std::uint64_t, std::uint64_t>;

// Every hash added is found, through many growths, 0 and 1 included; a
// hash never added is rarely found (only by sharing a stored form); Clear
// forgets everything and lets a large table go.
TEST(BacklogKeysTest, NeverMissesAnAddedHash) {
  BacklogKeys keys;
  EXPECT_FALSE(keys.Contains(0));
  std::mt19937 rng(1);
  std::unordered_set<std::uint32_t> added = {0, 1, 0xFFFFFFFFu};
  for (std::uint32_t h : added) keys.Add(h);
  while (added.size() < 200'000) {
    const std::uint32_t h = rng();
    keys.Add(h);
    keys.Add(h);  // a repeat, as two commands on one key
    added.insert(h);
  }
  for (std::uint32_t h : added) ASSERT_TRUE(keys.Contains(h)) << h;
  int strangers_found = 0;
  for (int i = 0; i < 200'000; ++i) {
    const std::uint32_t h = rng();
    if (added.count(h) == 0 && keys.Contains(h)) ++strangers_found;
  }
  EXPECT_EQ(strangers_found, 0);
  EXPECT_GT(keys.MemoryBytes(), 200'000u * 4);
  keys.Clear();
  EXPECT_EQ(keys.size(), 0u);
  EXPECT_EQ(keys.MemoryBytes(), 0u);
  for (std::uint32_t h : added) ASSERT_FALSE(keys.Contains(h)) << h;
  keys.Add(7);
  EXPECT_TRUE(keys.Contains(7));
  EXPECT_FALSE(keys.Contains(8));
}

// A stand-in for CommandQueue: PopBulk takes from the front.
struct FakeQueue {
  std::deque<Cmd> commands;
  std::size_t SizeApprox() const { return commands.size(); }
  std::size_t PopBulk(Cmd* out, std::size_t max) {
    std::size_t n = 0;
    for (; n < max && !commands.empty(); ++n) {
      out[n] = std::move(commands.front());
      commands.pop_front();
    }
    return n;
  }
};

std::uint32_t HashOf(const std::uint64_t& key) {
  return static_cast<std::uint32_t>(key * 2654435761u);
}

// Commands come out in the order they went in, batch by batch; their keys
// are known until the backlog empties; an unkeyed command is reported
// while it waits.
TEST(BacklogTest, KeepsOrderKeysAndUnkeyedCommands) {
  Backlog<Cmd> backlog(/*batch=*/4, /*max_commands=*/100);
  FakeQueue queue;
  for (std::uint64_t k = 0; k < 10; ++k) {
    queue.commands.push_back(k == 6 ? Cmd::Stop() : Cmd::Remove(k));
  }
  ASSERT_TRUE(backlog.TakeQueued(queue, HashOf));
  EXPECT_TRUE(queue.commands.empty());
  EXPECT_EQ(backlog.size(), 10u);
  EXPECT_TRUE(backlog.Unkeyed());
  for (std::uint64_t k = 0; k < 10; ++k) {
    if (k != 6) EXPECT_TRUE(backlog.Holds(HashOf(k))) << k;
  }
  EXPECT_FALSE(backlog.Holds(HashOf(10)));
  // More arrive while it is being applied: they join the last batch.
  queue.commands.push_back(Cmd::Remove(11));
  ASSERT_TRUE(backlog.TakeQueued(queue, HashOf));
  std::vector<std::uint64_t> order;
  std::vector<bool> unkeyed_before;
  while (!backlog.empty()) {
    unkeyed_before.push_back(backlog.Unkeyed());
    for (std::size_t i = 0; i < backlog.front_size(); ++i) {
      Cmd& c = backlog.front()[i];
      order.push_back(c.counted() ? c.key() : 99);
    }
    EXPECT_TRUE(backlog.Holds(HashOf(11)));
    backlog.PopFront();
  }
  EXPECT_EQ(order,
            (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 99, 7, 8, 9, 11}));
  // The stop sat in the second batch: reported until that was applied.
  EXPECT_EQ(unkeyed_before, (std::vector<bool>{true, true, false}));
  EXPECT_FALSE(backlog.Holds(HashOf(11)));
}

// Full: it stops taking, leaves the rest queued in order, and says the
// queue was not emptied, so no tick may run ahead.
TEST(BacklogTest, StopsShortWhenFull) {
  Backlog<Cmd> backlog(/*batch=*/4, /*max_commands=*/8);
  FakeQueue queue;
  for (std::uint64_t k = 0; k < 20; ++k) {
    queue.commands.push_back(Cmd::Set(k, k, 100));
  }
  EXPECT_FALSE(backlog.TakeQueued(queue, HashOf));
  EXPECT_EQ(backlog.size(), 8u);
  ASSERT_EQ(queue.commands.size(), 12u);
  EXPECT_EQ(queue.commands.front().key(), 8u);
  backlog.PopFront();
  EXPECT_FALSE(backlog.TakeQueued(queue, HashOf));  // 8 again: still full
  EXPECT_EQ(queue.commands.front().key(), 12u);
  backlog.PopFront();
  backlog.PopFront();
  EXPECT_TRUE(backlog.empty());
  // The last 8 fill it exactly: it cannot know the queue is empty.
  EXPECT_FALSE(backlog.TakeQueued(queue, HashOf));
  EXPECT_TRUE(queue.commands.empty());
  backlog.PopFront();
  EXPECT_TRUE(backlog.TakeQueued(queue, HashOf));
  EXPECT_EQ(backlog.size(), 4u);
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
