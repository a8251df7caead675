// EntryPool on its own, against a model of which indices are live; the
// tests play the pool's owner, relocating entries when it shrinks.
#include "timingwheel/internal/wheel/entry_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace timingwheel::internal {
namespace entry_pool_test {

struct TestEntry {
  std::uint32_t prev;
  std::uint32_t next;
  std::uint64_t payload;
};
using Pool = EntryPool<TestEntry>;
constexpr std::uint32_t kNil = Pool::kNil;
constexpr std::uint32_t kChunk = 4096;  // entries a chunk
constexpr std::size_t kChunkBytes = kChunk * sizeof(TestEntry);
constexpr std::uint32_t kSlab = 16 * kChunk;

// The high-water mark, from Holds (i < used).
std::uint32_t UsedOf(const Pool& pool) {
  std::uint32_t lo = 0, hi = Pool::kMaxEntries;  // Holds(hi) is false
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (pool.Holds(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// What a live entry's owner wrote: the pool must not change it. prev is
// never kFreeMark, sometimes tagged like a list head.
std::uint32_t PrevFor(std::uint64_t payload) {
  const auto p = static_cast<std::uint32_t>(payload * 0x9E3779B97F4A7C15u);
  return p == Pool::kFreeMark ? 0 : p;
}
std::uint32_t NextFor(std::uint64_t payload) {
  return static_cast<std::uint32_t>(payload >> 7) ^ 0x5bd1e995u;
}

// A pool and a model of its live entries, each with a unique payload; plays
// the owner and checks every answer of the pool against the model.
class Harness {
 public:
  explicit Harness(std::uint64_t seed = 1) : rng_(seed) {}

  Pool pool;
  std::vector<std::uint32_t> live;  // live indices, in no order
  int completed = 0;                // shrinks that freed their tail
  int ended_full = 0;               // shrinks ended: the kept range was full
  int ended_by_reserve = 0;         // ... found so by ReserveOne

  std::size_t Size() const { return live.size(); }
  std::uint32_t RandomLive() {
    return live[std::uniform_int_distribution<std::size_t>(
        0, live.size() - 1)(rng_)];
  }

  // ReserveOne and Allocate, as the owner inserts. Returns the index, or
  // kNil after a fatal failure.
  std::uint32_t Add() {
    std::uint32_t i = kNil;
    AddChecked(i);
    return i;
  }

  void Remove(std::uint32_t i) {
    Untrack(i);
    pool.Free(i);
    EXPECT_EQ(pool.At(i).prev, Pool::kFreeMark);
  }
  void RemoveRandom() { Remove(RandomLive()); }

  // The owner's Clear: its entries are gone.
  void Clear() {
    for (std::uint32_t i : live) pos_[i] = kNone;
    live.clear();
    pool.Clear();
    EXPECT_EQ(UsedOf(pool), 0u);
    EXPECT_FALSE(pool.Shrinking());
  }

  void StartShrink() {
    const std::size_t bytes = pool.MemoryBytes();
    const std::uint32_t capacity = Capacity();
    const bool was = pool.Shrinking();
    pool.StartShrink();
    if (was) {
      EXPECT_TRUE(pool.Shrinking());
      return;
    }
    if (pool.Shrinking()) {
      last_kept_ = pool.KeptEnd();
      EXPECT_EQ(pool.MemoryBytes(), bytes);
      CheckKept(last_kept_, capacity);
      EXPECT_GT(UsedOf(pool), last_kept_);
    } else if (pool.MemoryBytes() != bytes) {
      EXPECT_LT(pool.MemoryBytes(), bytes);
      CheckKept(Capacity(), capacity);
      for (std::uint32_t i : live) ASSERT_TRUE(pool.Holds(i));
    }
  }

  // Adds as many as there are free kept entries: the shrink goes on, the
  // kept range is full.
  void FillKept() {
    const std::uint32_t kept = pool.KeptEnd();
    for (std::uint32_t n = CountBelow(kept); n < kept; ++n) {
      ASSERT_LT(Add(), kept);
    }
    EXPECT_TRUE(pool.Shrinking());
  }

  // One round of the owner's relocation loop; returns the moves made.
  std::size_t Step(std::size_t budget) {
    std::size_t moves = 0;
    StepChecked(budget, moves);
    return moves;
  }

  // Every live entry holds what its owner wrote.
  void CheckAll() {
    ASSERT_EQ(pool.Live(), live.size());
    const std::uint32_t used = UsedOf(pool);
    for (std::uint32_t i : live) {
      ASSERT_LT(i, used);
      const TestEntry& e = pool.At(i);
      ASSERT_EQ(e.payload, payload_[i]) << i;
      ASSERT_EQ(e.prev, PrevFor(e.payload)) << i;
      ASSERT_EQ(e.next, NextFor(e.payload)) << i;
    }
  }

  // Entries the chunks hold, from MemoryBytes: the chunk table adds less
  // than a chunk's bytes here.
  std::uint32_t Capacity() const {
    return static_cast<std::uint32_t>(pool.MemoryBytes() / kChunkBytes *
                                      kChunk);
  }

 private:
  void AddChecked(std::uint32_t& i) {
    const std::size_t bytes = pool.MemoryBytes();
    const bool held_free = live.size() < UsedOf(pool);
    const bool shrinking = pool.Shrinking();
    pool.ReserveOne();
    if (pool.MemoryBytes() != bytes) {
      ASSERT_FALSE(held_free) << "grew while a held index was free";
      ASSERT_FALSE(pool.Shrinking());
    }
    if (shrinking && !pool.Shrinking()) {
      ++ended_by_reserve;
      ASSERT_EQ(CountBelow(last_kept_), last_kept_) << "ended with room";
    }
    const std::size_t reserved = pool.MemoryBytes();
    const std::uint32_t j = pool.Allocate();
    ASSERT_EQ(pool.MemoryBytes(), reserved) << "Allocate allocated";
    if (pool.Shrinking()) {
      ASSERT_LT(j, pool.KeptEnd());
    }
    ASSERT_NO_FATAL_FAILURE(Track(j, next_payload_++));
    i = j;
  }

  void StepChecked(std::size_t& budget, std::size_t& moves) {
    while (pool.Shrinking()) {
      const std::size_t before = budget;
      const std::uint32_t kept = pool.KeptEnd();
      const std::uint32_t used = UsedOf(pool);
      const std::size_t bytes = pool.MemoryBytes();
      const std::uint32_t i = pool.NextToRelocate(budget);
      ASSERT_LE(budget, before);
      if (i == kNil) {
        if (pool.Shrinking()) {
          ASSERT_EQ(budget, 0u) << "stopped with budget left";
        } else if (UsedOf(pool) <= kept) {
          ++completed;
          ASSERT_EQ(UsedOf(pool), kept);
          ASSERT_LT(pool.MemoryBytes(), bytes);
          ASSERT_EQ(Capacity(), kept);
          ASSERT_EQ(CountBelow(kept), live.size()) << "left one above";
        } else {
          ++ended_full;
          ASSERT_EQ(UsedOf(pool), used);
          ASSERT_EQ(CountBelow(kept), kept) << "ended with room";
        }
        return;
      }
      ASSERT_LT(budget, before);
      ASSERT_GE(i, kept);
      ASSERT_LT(i, used);
      ASSERT_TRUE(IsLive(i)) << i;
      const std::uint32_t j = pool.Allocate();
      ASSERT_TRUE(pool.Shrinking());
      ASSERT_LT(j, kept);
      ASSERT_EQ(pool.MemoryBytes(), bytes) << "Allocate allocated";
      const std::uint64_t payload = pool.At(i).payload;
      ASSERT_EQ(payload, payload_[i]);
      Untrack(i);
      ASSERT_NO_FATAL_FAILURE(Track(j, payload));
      pool.Free(i);
      ++moves;
    }
  }

  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  bool IsLive(std::uint32_t i) const {
    return i < pos_.size() && pos_[i] != kNone;
  }
  std::uint32_t CountBelow(std::uint32_t end) const {
    return static_cast<std::uint32_t>(std::count_if(
        live.begin(), live.end(), [end](std::uint32_t i) { return i < end; }));
  }

  // A kept range ends on a chunk, beyond the first slab on a slab; it has
  // room for twice the live entries and is smaller than what was held.
  void CheckKept(std::uint32_t kept, std::uint32_t capacity) const {
    EXPECT_EQ(kept % kChunk, 0u);
    if (kept > kSlab) {
      EXPECT_EQ(kept % kSlab, 0u) << kept;
    }
    EXPECT_GE(kept, 2 * live.size());
    EXPECT_GE(kept, kChunk);
    EXPECT_LT(kept, capacity);
  }

  void Track(std::uint32_t i, std::uint64_t payload) {
    ASSERT_TRUE(pool.Holds(i));
    ASSERT_GE(pool.MemoryBytes(), (std::size_t{i} / kChunk + 1) * kChunkBytes);
    ASSERT_NE(pool.At(i).prev, Pool::kFreeMark) << "Allocate left the mark";
    ASSERT_FALSE(IsLive(i)) << "index " << i << " handed out twice";
    if (pos_.size() <= i) {
      pos_.resize(std::size_t{i} + 1, kNone);
      payload_.resize(std::size_t{i} + 1);
    }
    pos_[i] = static_cast<std::uint32_t>(live.size());
    live.push_back(i);
    payload_[i] = payload;
    TestEntry& e = pool.At(i);
    e.payload = payload;
    e.prev = PrevFor(payload);
    e.next = NextFor(payload);
  }

  void Untrack(std::uint32_t i) {
    ASSERT_TRUE(IsLive(i));
    const std::uint32_t p = pos_[i];
    live[p] = live.back();
    pos_[live[p]] = p;
    live.pop_back();
    pos_[i] = kNone;
  }

  std::mt19937_64 rng_;
  std::vector<std::uint32_t> pos_;  // pos_[i]: where live holds i, or kNone
  std::vector<std::uint64_t> payload_;
  std::uint64_t next_payload_ = 1;
  std::uint32_t last_kept_ = 0;
};

// Allocating and freeing without ever shrinking: indices in bump order,
// freed ones again last freed first, chunks one by one and then cut from
// slabs; a pool that is never asked to shrink behaves as a plain free list.
TEST(EntryPoolTest, NeverShrinkingBumpsAndReusesLastFreedFirst) {
  Pool pool;
  EXPECT_EQ(pool.MemoryBytes(), 0u);
  EXPECT_FALSE(pool.Holds(0));
  for (std::uint32_t i = 0; i < 10000; ++i) {
    pool.ReserveOne();
    ASSERT_EQ(pool.Allocate(), i);
    pool.At(i).prev = i;  // the owner links it
  }
  EXPECT_EQ(pool.Live(), 10000u);
  EXPECT_TRUE(pool.Holds(9999));
  EXPECT_FALSE(pool.Holds(10000));
  pool.Free(5);
  pool.Free(7000);
  pool.Free(3);
  EXPECT_EQ(pool.At(7000).prev, Pool::kFreeMark);
  EXPECT_EQ(pool.Live(), 9997u);
  EXPECT_TRUE(pool.Holds(7000));
  for (std::uint32_t want : {3u, 7000u, 5u, 10000u, 10001u}) {
    pool.ReserveOne();
    const std::uint32_t i = pool.Allocate();
    EXPECT_EQ(i, want);
    EXPECT_NE(pool.At(i).prev, Pool::kFreeMark);
  }
  const std::size_t three_chunks = pool.MemoryBytes();
  EXPECT_GE(three_chunks, 3 * kChunkBytes);
  EXPECT_LT(three_chunks, 4 * kChunkBytes);

  for (std::uint32_t i = 10002; i < kSlab + 2 * kChunk; ++i) {
    pool.ReserveOne();
    ASSERT_EQ(pool.Allocate(), i);
  }
  EXPECT_GE(pool.MemoryBytes(), 18 * kChunkBytes);
  EXPECT_LT(pool.MemoryBytes(), 19 * kChunkBytes);
  // Chunks 16 and 17 are one slab.
  EXPECT_EQ(&pool.At(kSlab + kChunk), &pool.At(kSlab) + kChunk);
  EXPECT_FALSE(pool.WantsShrink());
  EXPECT_FALSE(pool.Shrinking());
  EXPECT_EQ(pool.KeptEnd(), kNil);
  std::size_t budget = 100;
  EXPECT_EQ(pool.NextToRelocate(budget), kNil);
  EXPECT_EQ(budget, 100u);
}

// Freed in scattered order (as timers fire: by deadline, not by allocation),
// a pool that took in half its entries on the free list hands them out
// again in ascending order, so the next burst's entries are dense; never
// one twice, and none past the high-water mark while any is free.
TEST(EntryPoolTest, ScatteredFreesAreReusedInAddressOrder) {
  Pool pool;
  const std::uint32_t n = 4 * kChunk;
  for (std::uint32_t i = 0; i < n; ++i) {
    pool.ReserveOne();
    ASSERT_EQ(pool.Allocate(), i);
  }
  std::vector<std::uint32_t> order(n);
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  for (std::uint32_t i : order) pool.Free(i);
  EXPECT_EQ(pool.Live(), 0u);
  ASSERT_TRUE(pool.CheckInvariants().ok());
  // Those freed before the reordering came off the list; the scan lists
  // each as it passes, so all come back ascending.
  for (std::uint32_t want = 0; want < n; ++want) {
    pool.ReserveOne();
    ASSERT_EQ(pool.Allocate(), want);
  }
  ASSERT_TRUE(pool.CheckInvariants().ok());

  // Half freed at random, then refilled: ascending again, and only then
  // new indices.
  std::vector<std::uint32_t> half(order.begin(), order.begin() + n / 2);
  for (std::uint32_t i : half) pool.Free(i);
  std::sort(half.begin(), half.end());
  for (std::uint32_t want : half) {
    pool.ReserveOne();
    ASSERT_EQ(pool.Allocate(), want);
  }
  pool.ReserveOne();
  EXPECT_EQ(pool.Allocate(), n);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// The randomized differential test: inserts and removals in phases that
// grow, hold or drain the live set, with shrinks started and stepped with
// random budgets at random points, against the model.
TEST(EntryPoolTest, RandomizedAgainstModel) {
  int completed = 0, ended_full = 0, ended_by_reserve = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    Harness h(seed);
    std::mt19937_64 rng(seed * 7919);
    std::uniform_real_distribution<double> coin(0, 1);
    for (int phase = 0; phase < 40; ++phase) {
      const double add =
          std::vector<double>{0.02, 0.3, 0.5, 0.7, 0.98}[rng() % 5];
      const int length = 1000 + static_cast<int>(rng() % 60000);
      // Rounds rare and small (the live set may grow back before a shrink
      // is done) to frequent and large.
      const double step = std::vector<double>{0.0005, 0.003, 0.02}[rng() % 3];
      const double max_log_budget = 4 + rng() % 9;
      for (int op = 0; op < length; ++op) {
        const double r = coin(rng);
        if (r < 0.0005) {
          if (h.pool.WantsShrink() || coin(rng) < 0.2) h.StartShrink();
        } else if (r < 0.0006) {
          if (coin(rng) < 0.1) h.Clear();
        } else if (r < 0.0007) {
          // The live set grows back to fill the kept range (and maybe
          // beyond), then a round: the shrink must end, not fail.
          if (h.pool.Shrinking()) {
            h.FillKept();
            if (coin(rng) < 0.5) h.Add();
            h.Step(1000);
          }
        } else if (r < 0.0007 + step) {
          // Budgets from 0 up.
          h.Step(
              static_cast<std::size_t>(std::exp2(coin(rng) * max_log_budget)) -
              1);
        } else if ((coin(rng) < add && h.Size() < 300000) || h.Size() == 0) {
          h.Add();
        } else {
          h.RemoveRandom();
        }
        if (::testing::Test::HasFatalFailure()) return;
      }
      h.CheckAll();
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Drained, a pool shrinks to one chunk.
    while (h.Size() > 0) h.RemoveRandom();
    while (h.pool.Shrinking()) ASSERT_NO_FATAL_FAILURE(h.Step(1000));
    h.StartShrink();
    while (h.pool.Shrinking()) ASSERT_NO_FATAL_FAILURE(h.Step(1000));
    EXPECT_LT(h.pool.MemoryBytes(), 2 * kChunkBytes);
    completed += h.completed;
    ended_full += h.ended_full;
    ended_by_reserve += h.ended_by_reserve;
  }
  // The seeds reach every way a shrink ends.
  EXPECT_GT(completed, 10);
  EXPECT_GT(ended_full, 3);
  EXPECT_GT(ended_by_reserve, 3);
}

// A million entries, all but a thousand scattered ones freed: the shrink
// moves those in bounded rounds and gives back nearly everything.
TEST(EntryPoolTest, ShrinksAMillionToAThousandInBoundedRounds) {
  Harness h;
  constexpr std::uint32_t kN = 1000000;
  for (std::uint32_t n = 0; n < kN; ++n) ASSERT_NO_FATAL_FAILURE(h.Add());
  const std::size_t peak = h.pool.MemoryBytes();
  for (std::uint32_t i = 0; i < kN; ++i) {
    if (i % 1000 != 999) h.Remove(i);
  }
  ASSERT_EQ(h.Size(), 1000u);
  EXPECT_EQ(h.pool.MemoryBytes(), peak);
  ASSERT_TRUE(h.pool.WantsShrink());
  h.StartShrink();
  ASSERT_TRUE(h.pool.Shrinking());
  EXPECT_EQ(h.pool.KeptEnd(), kChunk);

  constexpr std::size_t kBudget = 1024;
  int rounds = 0;
  std::size_t moved = 0;
  while (h.pool.Shrinking()) {
    const std::size_t moves = h.Step(kBudget);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    EXPECT_LE(moves, kBudget);
    moved += moves;
    ++rounds;
    ASSERT_LT(rounds, 10000);
  }
  EXPECT_EQ(h.completed, 1);
  EXPECT_EQ(moved, 1000u - 4u);  // 999, 1999, 2999 and 3999 stay
  // Each index of the tail looked at once, each moved entry once more, and
  // the scan for free kept entries: about kN / kBudget rounds, no fewer.
  EXPECT_GE(rounds, static_cast<int>(kN / kBudget) - 5);
  EXPECT_LE(rounds, static_cast<int>((kN + 2 * 1000 + kChunk) / kBudget) + 2);
  EXPECT_LT(h.pool.MemoryBytes(), peak / 10);
  EXPECT_LT(h.pool.MemoryBytes(), 2 * kChunkBytes);
  EXPECT_EQ(UsedOf(h.pool), kChunk);
  EXPECT_FALSE(h.pool.WantsShrink());
  h.CheckAll();

  // The live set grows back: chunks come back one by one.
  for (int n = 0; n < 10000; ++n) ASSERT_NO_FATAL_FAILURE(h.Add());
  h.CheckAll();
  EXPECT_GE(h.pool.MemoryBytes(), 3 * kChunkBytes);
  EXPECT_LT(h.pool.MemoryBytes(), 4 * kChunkBytes);
}

// A budget of one still finishes a shrink.
TEST(EntryPoolTest, BudgetOfOneMakesProgress) {
  Harness h;
  for (int n = 0; n < 5 * static_cast<int>(kChunk); ++n)
    ASSERT_NO_FATAL_FAILURE(h.Add());
  for (std::uint32_t i = 0; i < 5 * kChunk; ++i) {
    if (i % 97 != 0) h.Remove(i);
  }
  h.StartShrink();
  ASSERT_TRUE(h.pool.Shrinking());
  int rounds = 0;
  while (h.pool.Shrinking()) {
    EXPECT_LE(h.Step(1), 1u);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_LT(++rounds, 100000);
  }
  EXPECT_EQ(h.completed, 1);
  EXPECT_EQ(h.Capacity(), kChunk);
  h.CheckAll();
}

// Allocates n entries, then frees all but every 20th.
void FillThenKeepOneIn20(Harness& h, std::uint32_t n) {
  for (std::uint32_t k = 0; k < n; ++k) ASSERT_NO_FATAL_FAILURE(h.Add());
  for (std::uint32_t i = 0; i < n; ++i) {
    if (i % 20 != 0) h.Remove(i);
  }
}

// The live set grows back during a shrink: once the kept range is full,
// allocation goes on above it (the shrink ends) and reuses the free entries
// there before allocating memory.
TEST(EntryPoolTest, AllocationsBeyondTheKeptRangeEndTheShrink) {
  Harness h;
  constexpr std::uint32_t kN = 200000;
  ASSERT_NO_FATAL_FAILURE(FillThenKeepOneIn20(h, kN));
  const std::size_t peak = h.pool.MemoryBytes();
  h.StartShrink();
  ASSERT_TRUE(h.pool.Shrinking());
  const std::uint32_t kept = h.pool.KeptEnd();
  EXPECT_EQ(kept, 5 * kChunk);  // 20000 entries, rounded up to chunks
  EXPECT_GT(h.Step(300), 0u);   // some moved, not all
  ASSERT_TRUE(h.pool.Shrinking());

  std::uint32_t added = 0;
  while (h.pool.Shrinking()) {
    ASSERT_NO_FATAL_FAILURE(h.Add());  // below `kept` while the shrink lasts
    ASSERT_LT(++added, kept);
  }
  EXPECT_EQ(h.ended_by_reserve, 1);
  EXPECT_EQ(h.completed, 0);
  // Every free index below the old high-water mark is used before memory.
  while (h.Size() < kN) ASSERT_NO_FATAL_FAILURE(h.Add());
  EXPECT_EQ(UsedOf(h.pool), kN);
  const std::uint32_t capacity = h.Capacity();
  while (h.Size() < capacity) ASSERT_NO_FATAL_FAILURE(h.Add());
  EXPECT_EQ(h.pool.MemoryBytes(), peak);
  h.Add();
  EXPECT_GT(h.pool.MemoryBytes(), peak);
  h.CheckAll();
}

// The same found by the relocation itself: the kept range filled up
// between rounds.
TEST(EntryPoolTest, RelocationEndsTheShrinkWhenTheKeptRangeIsFull) {
  Harness h;
  constexpr std::uint32_t kN = 200000;
  ASSERT_NO_FATAL_FAILURE(FillThenKeepOneIn20(h, kN));
  h.StartShrink();
  const std::uint32_t kept = h.pool.KeptEnd();
  ASSERT_EQ(kept, 5 * kChunk);
  // Exactly the free kept entries: the shrink goes on, with none left.
  for (std::uint32_t n = 0; n < kept - kept / 20; ++n) {
    ASSERT_LT(h.Add(), kept);
  }
  ASSERT_TRUE(h.pool.Shrinking());
  EXPECT_EQ(h.Step(100000), 0u);
  EXPECT_FALSE(h.pool.Shrinking());
  EXPECT_EQ(h.ended_full, 1);
  EXPECT_EQ(h.completed, 0);
  for (int n = 0; n < 1000; ++n) ASSERT_NO_FATAL_FAILURE(h.Add());
  h.CheckAll();
}

// Clear keeps the chunks; the next shrink gives them back at once.
TEST(EntryPoolTest, ClearThenShrinkFreesAllButOneChunk) {
  Harness h;
  for (int n = 0; n < 50000; ++n) ASSERT_NO_FATAL_FAILURE(h.Add());
  h.StartShrink();
  EXPECT_FALSE(h.pool.Shrinking());
  const std::size_t full = h.pool.MemoryBytes();
  h.Clear();
  EXPECT_EQ(h.pool.MemoryBytes(), full);
  EXPECT_EQ(h.pool.Live(), 0u);
  ASSERT_TRUE(h.pool.WantsShrink());
  h.StartShrink();
  EXPECT_FALSE(h.pool.Shrinking());
  EXPECT_EQ(h.Capacity(), kChunk);
  EXPECT_LT(h.pool.MemoryBytes(), 2 * kChunkBytes);
  EXPECT_EQ(h.Add(), 0u);
  EXPECT_EQ(h.Add(), 1u);
}

// Clear during a shrink ends it.
TEST(EntryPoolTest, ClearEndsAShrink) {
  Harness h;
  for (int n = 0; n < 100000; ++n) ASSERT_NO_FATAL_FAILURE(h.Add());
  for (std::uint32_t i = 0; i < 99000; ++i) h.Remove(i);
  h.StartShrink();
  ASSERT_TRUE(h.pool.Shrinking());
  h.Step(10);
  h.Clear();
  EXPECT_EQ(h.pool.KeptEnd(), kNil);
  EXPECT_EQ(h.Add(), 0u);
  EXPECT_EQ(h.Add(), 1u);
}

// A small pool does not shrink; a quarter live does not either.
TEST(EntryPoolTest, WantsShrinkThresholds) {
  Harness h;
  for (std::uint32_t n = 0; n < 3 * kChunk; ++n)
    ASSERT_NO_FATAL_FAILURE(h.Add());
  for (std::uint32_t i = 0; i < 3 * kChunk; ++i) h.Remove(i);
  EXPECT_FALSE(h.pool.WantsShrink());  // three chunks
  for (std::uint32_t n = 0; n < 8 * kChunk; ++n)
    ASSERT_NO_FATAL_FAILURE(h.Add());
  while (h.Size() > 2 * kChunk) h.RemoveRandom();
  EXPECT_FALSE(h.pool.WantsShrink());  // exactly a quarter
  h.RemoveRandom();
  EXPECT_TRUE(h.pool.WantsShrink());
  h.StartShrink();
  EXPECT_EQ(h.pool.KeptEnd(), 4 * kChunk);
  EXPECT_FALSE(h.pool.WantsShrink());
  while (h.pool.Shrinking()) ASSERT_NO_FATAL_FAILURE(h.Step(500));
  EXPECT_EQ(h.completed, 1);
  EXPECT_EQ(h.Capacity(), 4 * kChunk);
  EXPECT_FALSE(h.pool.WantsShrink());
  h.CheckAll();
}

}  // namespace entry_pool_test
}  // namespace timingwheel::internal
