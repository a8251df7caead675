// The Cache's private pieces on their own: the index against
// std::unordered_map (including shrinking after a mass removal), the
// frequency sketch's bounds, and the pool's reuse of freed nodes.

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "timingwheel/internal/cache/index.h"
#include "timingwheel/internal/cache/pool.h"
#include "timingwheel/internal/cache/sketch.h"

namespace timingwheel {
namespace internal {
namespace {

// Keys are small integers; node i holds key keys[i]. Tags are deliberately
// weak (few distinct values) so that clusters, wrap-around and backward
// shifts are exercised, and a tag match alone never decides.
TEST(CacheIndex, MatchesAMapUnderRandomInsertsAndErases) {
  for (std::uint32_t tag_bits : {2u, 8u, 32u}) {
    CacheIndex index;
    std::unordered_map<int, std::uint32_t> model;  // key -> node
    std::vector<int> key_of;                       // node -> key
    std::mt19937 rng(tag_bits);
    auto tag = [&](int key) {
      const std::uint32_t h = static_cast<std::uint32_t>(key) * 2654435761u;
      return tag_bits == 32 ? h : h & ((1u << tag_bits) - 1);
    };
    auto find = [&](int key) {
      return index.Find(tag(key),
                        [&](std::uint32_t n) { return key_of[n] == key; });
    };
    for (int step = 0; step < 60000; ++step) {
      const int key = static_cast<int>(rng() % 2000);
      const bool grow = step < 30000;
      if (rng() % 3 != 0 && grow) {
        if (!model.count(key)) {
          const std::uint32_t node = static_cast<std::uint32_t>(key_of.size());
          key_of.push_back(key);
          index.Insert(tag(key), node);
          model[key] = node;
        }
      } else if (model.count(key)) {
        index.Erase(tag(key), model[key]);
        model.erase(key);
      }
      ASSERT_EQ(index.size(), model.size());
      if (step % 97 == 0) {
        for (int k = 0; k < 2000; k += 7) {
          auto it = model.find(k);
          ASSERT_EQ(find(k), it == model.end() ? kCacheNil : it->second)
              << "tag bits " << tag_bits << " step " << step << " key " << k;
        }
      }
      ASSERT_LE(index.size() * 4, index.capacity() * 3);
    }
    // The second half only erased: the table followed the size down.
    ASSERT_LT(model.size(), 100u);
    EXPECT_LE(index.capacity(), 256u);
    std::size_t seen = 0;
    index.ForEach([&](std::uint32_t n) {
      ++seen;
      EXPECT_EQ(model.at(key_of[n]), n);
    });
    EXPECT_EQ(seen, model.size());
    index.Clear();
    EXPECT_EQ(index.capacity(), 0u);
    EXPECT_EQ(find(1), kCacheNil);
  }
}

TEST(CacheSketch, NeverUnderCountsUntilHalvedAndSaturatesAt15) {
  CacheFrequencySketch sketch;
  sketch.Reset(1000);  // halves after 10,000 increments
  std::vector<int> count(500);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 9000; ++i) {
    const int k = static_cast<int>(rng() % 500);
    ++count[k];
    sketch.Increment(static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ULL);
  }
  for (int k = 0; k < 500; ++k) {
    EXPECT_GE(
        sketch.Frequency(static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ULL),
        std::min(count[k], 15));
  }
  const std::uint64_t hot = 12345;
  for (int i = 0; i < 100; ++i) sketch.Increment(hot);
  EXPECT_EQ(sketch.Frequency(hot), 15);
  // Past the sample size every counter is halved: old popularity fades.
  for (int i = 0; i < 20000; ++i) sketch.Increment(1000000 + i);
  EXPECT_LT(sketch.Frequency(hot), 8);
}

TEST(CachePool, ReusesFreedNodesBeforeGrowing) {
  CachePool<int, std::vector<int>> pool(/*extras=*/true);
  std::vector<std::uint32_t> nodes;
  for (int i = 0; i < 3000; ++i) {
    nodes.push_back(pool.Allocate(i, std::vector<int>(3, i)));
  }
  EXPECT_EQ(pool.extent(), 3000u);
  for (int i = 0; i < 3000; i += 2) pool.Free(nodes[i]);
  for (int i = 0; i < 1500; ++i) pool.Allocate(-i, {});
  EXPECT_EQ(pool.extent(), 3000u);
  for (int i = 1; i < 3000; i += 2) {
    EXPECT_EQ(pool.at(nodes[i]).key(), i);
    EXPECT_EQ(pool.at(nodes[i]).value()[2], i);
  }
  const std::uint32_t s = pool.AllocateSentinel();
  EXPECT_FALSE(pool.at(s).is_entry());
  EXPECT_EQ(pool.at(s).enext, s);
  pool.DestroyAll();  // destroys the live vectors (ASan checks for leaks)
  EXPECT_EQ(pool.extent(), 0u);
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
