// Internal: the Wheel with unusual keys and values (move-only, without a
// default constructor, strings, 32-bit keys equal to its own sentinels),
// with keys whose hashes collide, and every key and value destroyed exactly
// once, also for lazy removes; prefetch hints change nothing, and memory
// is accounted for. Scheduling is in wheel_test.cc.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/constant_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "wheel_fires.h"

namespace timingwheel {
namespace internal {
namespace wheel_keys_values_test {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using ::timingwheel::testing::ConstantHash;
using wheel_testing::Advance;
using wheel_testing::F;
using wheel_testing::Fire;
using wheel_testing::IntWheel;

TEST(WheelTest, MoveOnlyValuesReachTheSinkAndTakeAll) {
  Wheel<int, std::unique_ptr<int>> w(4);
  EXPECT_FALSE(w.Set(1, std::make_unique<int>(10), 3));
  EXPECT_TRUE(w.Set(1, std::make_unique<int>(11), 5));
  w.Set(2, std::make_unique<int>(20), 6);
  w.Set(3, nullptr, 7);
  w.Move(2, 9);
  std::vector<std::pair<std::uint64_t, int>> fired;
  w.AdvanceTo(
      8, [&](std::uint64_t tick, int&& key, std::unique_ptr<int>&& value) {
        fired.emplace_back(tick, value ? *value : -key);
        std::unique_ptr<int> mine = std::move(value);  // the sink takes it
      });
  EXPECT_THAT(fired, ElementsAre(Pair(5, 11), Pair(7, -3)));
  std::vector<int> taken;
  w.TakeAll([&](int&&, std::unique_ptr<int>&& value) {
    taken.push_back(*value);  // and here the wheel keeps and destroys it
  });
  EXPECT_THAT(taken, ElementsAre(20));
}

class NoDefaultKey {
 public:
  explicit NoDefaultKey(int id) : id_(id) {}
  int id() const { return id_; }
  friend bool operator==(const NoDefaultKey& a, const NoDefaultKey& b) {
    return a.id_ == b.id_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const NoDefaultKey& k) {
    return H::combine(std::move(h), k.id_);
  }

 private:
  int id_;
};

struct NoDefaultValue {
  explicit NoDefaultValue(int v) : v(v) {}
  int v;
};

TEST(WheelTest, KeyAndValueWithoutDefaultConstructor) {
  static_assert(!std::is_default_constructible_v<NoDefaultKey>);
  static_assert(!std::is_default_constructible_v<NoDefaultValue>);
  Wheel<NoDefaultKey, NoDefaultValue> w(4);
  w.Set(NoDefaultKey(1), NoDefaultValue(10), 2);
  w.Set(NoDefaultKey(2), NoDefaultValue(20), 9);
  EXPECT_TRUE(w.Move(NoDefaultKey(2), 3));
  EXPECT_THAT(w.DeadlineOf(NoDefaultKey(2)), Optional(3u));
  std::vector<std::tuple<std::uint64_t, int, int>> fired;
  w.AdvanceTo(10, [&](std::uint64_t t, NoDefaultKey&& k, NoDefaultValue&& v) {
    fired.emplace_back(t, k.id(), v.v);
  });
  EXPECT_THAT(
      fired, ElementsAre(std::make_tuple(2, 1, 10), std::make_tuple(3, 2, 20)));
}

TEST(WheelTest, StringKeysOfAnyLengthAreToldApart) {
  using W = Wheel<std::string, int>;
  W w(8);
  // Held in place up to InlineString::kCapacity characters, on the heap
  // past it: keys either side of that line, and keys that share prefixes.
  constexpr std::size_t kInline = InlineString::kCapacity;
  const std::string long_a(100, 'a');
  const std::string long_b = std::string(99, 'a') + "b";
  const std::string full(kInline, 'f');
  const std::string over(kInline + 1, 'f');
  w.Set("", 1, 4);
  w.Set("x", 2, 5);
  w.Set(long_a, 3, 6);
  w.Set(long_b, 4, 7);
  w.Set(full, 6, 9);
  w.Set(over, 7, 10);
  EXPECT_TRUE(w.Set("x", 5, 8));
  EXPECT_TRUE(w.Move(long_a, 20));
  EXPECT_TRUE(w.Remove(long_b));
  EXPECT_FALSE(w.Remove(long_b));
  EXPECT_FALSE(w.Move("y", 3));
  EXPECT_FALSE(w.Move(std::string(kInline - 1, 'f'), 3));
  EXPECT_THAT(w.DeadlineOf(""), Optional(4u));
  EXPECT_THAT(w.DeadlineOf(full), Optional(9u));
  EXPECT_THAT(w.DeadlineOf(over), Optional(10u));
  EXPECT_EQ(w.size(), 5u);
  std::vector<std::tuple<std::uint64_t, std::string, int>> fired;
  w.AdvanceTo(100, [&](std::uint64_t t, W::StoredKey&& k, int&& v) {
    fired.emplace_back(t, W::Store::Take(k), v);
  });
  EXPECT_THAT(fired,
              ElementsAre(std::make_tuple(4, "", 1), std::make_tuple(8, "x", 5),
                          std::make_tuple(9, full, 6),
                          std::make_tuple(10, over, 7),
                          std::make_tuple(20, long_a, 3)));
}

TEST(WheelTest, Uint32KeysAreNotConfusedWithEntryIndices) {
  // The map stores 32-bit entry indices and uses 0xFFFFFFFF and the top bit
  // as link sentinels. Keys with those values, and small keys inserted in an
  // order where key != index, must still find their own entries.
  Wheel<std::uint32_t, std::uint32_t> w(8);
  std::vector<std::uint32_t> keys = {0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu,
                                     0x80000001u, 4096,        4095};
  for (std::uint32_t k = 0; k < 100; ++k) keys.push_back(99 - k);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_FALSE(w.Set(keys[i], ~keys[i], 1 + i)) << keys[i];
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_THAT(w.DeadlineOf(keys[i]), Optional(1 + i)) << keys[i];
  }
  EXPECT_EQ(w.DeadlineOf(100), std::nullopt);
  EXPECT_EQ(w.DeadlineOf(0xFFFFFFFEu), std::nullopt);
  // Remove a few so the free list hands indices back out under new keys.
  EXPECT_TRUE(w.Remove(0));
  EXPECT_TRUE(w.Remove(1));
  EXPECT_TRUE(w.Remove(0xFFFFFFFFu));
  EXPECT_FALSE(w.Remove(0xFFFFFFFFu));
  EXPECT_FALSE(w.Set(1000, ~1000u, 500));
  EXPECT_FALSE(w.Set(1001, ~1001u, 501));
  EXPECT_TRUE(w.Move(0x80000000u, 502));
  std::size_t fired = 0;
  w.AdvanceTo(1000, [&](std::uint64_t t, std::uint32_t&& k, std::uint32_t&& v) {
    ++fired;
    EXPECT_EQ(v, ~k) << "key " << k;
    if (k == 1000) {
      EXPECT_EQ(t, 500u);
    }
    if (k == 0x80000000u) {
      EXPECT_EQ(t, 502u);
    }
    EXPECT_NE(k, 0u);
    EXPECT_NE(k, 1u);
    EXPECT_NE(k, 0xFFFFFFFFu);
  });
  EXPECT_EQ(fired, keys.size() - 3 + 2);
}

// Distinct full hashes that the wheel's 32-bit fold (h ^ h >> 32) maps to 0.
struct FoldCollidingHash {
  std::size_t operator()(std::uint64_t k) const {
    const std::uint64_t lo = k & 0xFFFFFFFFu;
    return (lo << 32) | lo;
  }
};

template <typename H>
void CollidingKeysWork() {
  Wheel<std::uint64_t, std::uint64_t, H> w(8);
  constexpr std::uint64_t kKeys = 200;
  for (std::uint64_t k = 0; k < kKeys; ++k) w.Set(k, k + 1, 1 + k % 37);
  for (std::uint64_t k = 0; k < kKeys; k += 3) ASSERT_TRUE(w.Remove(k));
  for (std::uint64_t k = 1; k < kKeys; k += 3) ASSERT_TRUE(w.Move(k, 100 + k));
  for (std::uint64_t k = 2; k < kKeys; k += 6) {
    ASSERT_TRUE(w.Set(k, k + 2, 50));
  }
  EXPECT_FALSE(w.Move(kKeys, 5));
  EXPECT_FALSE(w.Remove(kKeys));
  for (std::uint64_t k = 0; k < kKeys; ++k) {
    std::optional<std::uint64_t> want;
    if (k % 3 == 1) want = 100 + k;
    if (k % 3 == 2) want = k % 6 == 2 ? 50 : 1 + k % 37;
    ASSERT_EQ(w.DeadlineOf(k), want) << k;
  }
  std::set<std::uint64_t> seen;
  w.AdvanceTo(1000, [&](std::uint64_t t, std::uint64_t&& k, std::uint64_t&& v) {
    EXPECT_TRUE(seen.insert(k).second) << "fired twice: " << k;
    if (k % 3 == 1) {
      EXPECT_EQ(t, 100 + k);
      EXPECT_EQ(v, k + 1);
    } else if (k % 6 == 2) {
      EXPECT_EQ(t, 50u);
      EXPECT_EQ(v, k + 2);
    } else {
      EXPECT_EQ(k % 3, 2u);
      EXPECT_EQ(t, 1 + k % 37);
      EXPECT_EQ(v, k + 1);
    }
  });
  EXPECT_EQ(seen.size(), kKeys - (kKeys + 2) / 3);
  EXPECT_EQ(w.size(), 0u);
}

TEST(WheelTest, ConstantHashAllKeysCollide) {
  CollidingKeysWork<ConstantHash>();
}

TEST(WheelTest, FoldedHashesCollide) { CollidingKeysWork<FoldCollidingHash>(); }

// Tracks every live object by address, so a double destruction, a
// destruction of something never constructed, or a leak is caught exactly.
class Tracked {
 public:
  static std::multiset<const Tracked*>& Live() {
    static std::multiset<const Tracked*> live;
    return live;
  }
  static int& Errors() {
    static int errors = 0;
    return errors;
  }

  explicit Tracked(int id) : id_(id) { Register(); }
  Tracked(const Tracked& o) : id_(o.id_) { Register(); }
  Tracked(Tracked&& o) noexcept : id_(o.id_) {
    o.id_ = -1;
    Register();
  }
  Tracked& operator=(const Tracked& o) {
    id_ = o.id_;
    return *this;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    id_ = o.id_;
    o.id_ = -1;
    return *this;
  }
  ~Tracked() {
    auto it = Live().find(this);
    if (it == Live().end()) {
      ++Errors();
    } else {
      Live().erase(it);
    }
    id_ = -2;
  }
  int id() const { return id_; }
  friend bool operator==(const Tracked& a, const Tracked& b) {
    return a.id_ == b.id_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Tracked& t) {
    return H::combine(std::move(h), t.id_);
  }

 private:
  void Register() {
    if (Live().count(this) != 0) ++Errors();
    Live().insert(this);
  }
  int id_;
};

class WheelLifetimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Tracked::Live().clear();
    Tracked::Errors() = 0;
  }
  void ExpectAllDestroyedOnce() {
    EXPECT_EQ(Tracked::Errors(), 0) << "double or foreign destruction";
    EXPECT_THAT(Tracked::Live(), IsEmpty()) << "leaked keys or values";
  }
};

TEST_F(WheelLifetimeTest, EveryKeyAndValueDestroyedExactlyOnce) {
  {
    Wheel<Tracked, Tracked> w(4);
    // Enough entries for two pool chunks, so chunk boundaries are covered.
    for (int k = 0; k < 5000; ++k) w.Set(Tracked(k), Tracked(k), 1 + k % 13);
    for (int k = 0; k < 5000; k += 5) w.Remove(Tracked(k));  // remove
    for (int k = 1; k < 5000; k += 5) w.Set(Tracked(k), Tracked(-k), 3);
    for (int k = 2; k < 5000; k += 5) w.Move(Tracked(k), 40 + k);  // lazy
    for (int k = 3; k < 5000; k += 10) w.Move(Tracked(k), 1);      // earlier
    int fired = 0;
    w.AdvanceTo(6, [&](std::uint64_t, Tracked&& k, Tracked&& v) {
      ++fired;
      EXPECT_GE(k.id(), 0);
      if (k.id() % 2 == 0) Tracked keep = std::move(v);  // moved out
    });
    EXPECT_GT(fired, 0);
    ASSERT_EQ(Tracked::Errors(), 0);
    // Reuse freed pool entries, then hand some to TakeAll mid-life.
    for (int k = 5000; k < 5500; ++k) w.Set(Tracked(k), Tracked(k), 100);
    std::size_t taken = 0;
    w.TakeAll([&](Tracked&& k, Tracked&& v) {
      ++taken;
      if (k.id() % 3 == 0) Tracked keep = std::move(v);
    });
    EXPECT_GT(taken, 500u);
    // And leave a population, lazily moved ones included, to the destructor.
    for (int k = 0; k < 3000; ++k) w.Set(Tracked(k), Tracked(k), 200 + k);
    for (int k = 0; k < 3000; k += 2) w.Move(Tracked(k), 10'000 + k);
    for (int k = 1; k < 3000; k += 4) w.Remove(Tracked(k));
    EXPECT_EQ(Tracked::Errors(), 0);
    // Each pending entry holds exactly one key and one value.
    EXPECT_EQ(Tracked::Live().size(), 2 * w.size());
  }
  ExpectAllDestroyedOnce();
}

TEST_F(WheelLifetimeTest, ReplacedValueDestroyedAtOnce) {
  Wheel<int, Tracked> w(4);
  w.Set(1, Tracked(1), 5);
  EXPECT_EQ(Tracked::Live().size(), 1u);
  w.Set(1, Tracked(2), 6);
  EXPECT_EQ(Tracked::Live().size(), 1u);  // the superseded value is gone
  w.Remove(1);
  EXPECT_THAT(Tracked::Live(), IsEmpty());
  ExpectAllDestroyedOnce();
}

// A remove of a timer filed on level 0 leaves the entry in its list (see
// Wheel's "Lazy removes"): the key and value still die at the remove, the
// scan of the slot frees the entry without firing it, and a remove of a
// timer on a coarse level unlinks at once.
TEST_F(WheelLifetimeTest, ALazilyRemovedEntryHoldsNeitherKeyNorValue) {
  {
    Wheel<Tracked, Tracked> w(64);
    for (int k = 0; k < 3; ++k) w.Set(Tracked(k), Tracked(k), 5);
    w.Set(Tracked(7), Tracked(7), 9);
    w.Set(Tracked(8), Tracked(8), 200);  // level 1
    ASSERT_TRUE(w.Remove(Tracked(1)));   // the middle of slot 5's list
    ASSERT_TRUE(w.Remove(Tracked(7)));   // alone in slot 9
    ASSERT_TRUE(w.Remove(Tracked(8)));
    EXPECT_EQ(w.removed_in_lists(), 2u);
    EXPECT_EQ(w.size(), 2u);
    EXPECT_EQ(Tracked::Live().size(), 4u);  // keys and values of 0 and 2
    EXPECT_EQ(Tracked::Errors(), 0);
    std::vector<int> fired;
    auto sink = [&](std::uint64_t tick, Tracked&& k, Tracked&&) {
      EXPECT_EQ(tick, 5u);
      fired.push_back(k.id());
    };
    w.AdvanceTo(5, sink);
    EXPECT_THAT(fired, UnorderedElementsAre(0, 2));
    EXPECT_EQ(w.removed_in_lists(), 1u);
    // Only the removed entry in slot 9 is left: the wheel wakes for it,
    // frees it, and goes idle.
    EXPECT_EQ(w.NextDueTick(), 9u);
    w.AdvanceTo(9, sink);
    EXPECT_EQ(w.removed_in_lists(), 0u);
    EXPECT_EQ(w.NextDueTick(), kNever);
    EXPECT_EQ(fired.size(), 2u);
    // The key comes back as a new timer.
    w.Set(Tracked(1), Tracked(11), 12);
    w.AdvanceTo(20, [&](std::uint64_t tick, Tracked&& k, Tracked&& v) {
      EXPECT_EQ(tick, 12u);
      EXPECT_EQ(k.id(), 1);
      EXPECT_EQ(v.id(), 11);
      fired.push_back(k.id());
    });
    EXPECT_EQ(fired.size(), 3u);
  }
  ExpectAllDestroyedOnce();
}

TEST(WheelTest, PrefetchHintsChangeNothing) {
  // PrefetchEntry matches on the 32-bit hash alone, so with colliding keys
  // it may touch another key's entry: it must still only read.
  Wheel<std::uint64_t, std::uint64_t, ConstantHash> w(4);
  for (std::uint64_t k = 0; k < 10; ++k) w.Set(k, k, 1 + k);
  for (std::uint64_t k = 0; k < 20; ++k) {
    w.PrefetchIndex(w.HashOf(k));
    w.PrefetchEntry(w.HashOf(k));
  }
  EXPECT_EQ(w.size(), 10u);
  for (std::uint64_t k = 0; k < 10; ++k) {
    EXPECT_THAT(w.DeadlineOf(k), Optional(1 + k));
  }
  EXPECT_EQ(w.DeadlineOf(15), std::nullopt);
  std::vector<Fire<std::uint64_t, std::uint64_t>> fired;
  w.AdvanceTo(100, [&](std::uint64_t t, std::uint64_t&& k, std::uint64_t&& v) {
    fired.push_back({t, k, v});
  });
  ASSERT_EQ(fired.size(), 10u);
  for (std::uint64_t k = 0; k < 10; ++k) {
    EXPECT_EQ(fired[k], (F{1 + k, k, k}));
  }
}

TEST(WheelTest, MemoryBytesCountsTheSlotsAndEveryEntry) {
  EXPECT_EQ((Wheel<std::uint64_t, std::uint64_t>::EntryBytes()), 32u);
  IntWheel w(64);
  const std::size_t empty = w.MemoryBytes();
  EXPECT_GE(empty, 64u * 12u);
  w.Reserve(10'000);
  for (std::uint64_t k = 0; k < 10'000; ++k) w.Set(k, k, 1 + k);
  EXPECT_GE(w.MemoryBytes(), empty + 10'000 * IntWheel::EntryBytes());
  // Reserve is only a hint: behaviour is unchanged.
  EXPECT_EQ(Advance(w, 10'000).size(), 10'000u);
}

}  // namespace wheel_keys_values_test
}  // namespace internal
}  // namespace timingwheel
