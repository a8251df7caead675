// A user's key or value type may throw from a copy (api.md: nothing of ours
// throws; a user's type may). Through every write path (insert, replace in
// place, replace by a new entry, the Set without the lock, slide, the store
// after a load, Delete, Clear, eviction, expiry), a copy that throws leaves
// the cache as it was: the exception reaches the caller, no entry is left
// marked or half removed (CheckInvariants, and the next calls neither hang
// nor fail), and every value still leaves exactly once. Bounded and
// unbounded, with values stored in place (uint64_t) and by node (a heap
// value), under a ManualTicker.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {
namespace cache_exceptions_test {

// Copies of Key and HeapValue made from now on throw once `copies_left`
// reaches 0 (-1: never). Moves never throw.
std::atomic<int> copies_left{-1};
std::atomic<int> throws{0};

void CountCopy() {
  int left = copies_left.load();
  while (left >= 0) {
    if (left == 0) {
      if (copies_left.compare_exchange_strong(left, -1)) {
        throws.fetch_add(1);
        throw std::runtime_error("copy refused");
      }
    } else if (copies_left.compare_exchange_weak(left, left - 1)) {
      return;
    }
  }
}

// Arms the next `n`th copy (0: the next one) to throw; disarms at scope end.
struct ThrowOnCopy {
  explicit ThrowOnCopy(int n) { copies_left.store(n); }
  ~ThrowOnCopy() { copies_left.store(-1); }
};

struct Key {
  int id = 0;
  explicit Key(int i) : id(i) {}
  Key(const Key& o) : id(o.id) { CountCopy(); }
  Key(Key&& o) noexcept : id(o.id) {}
  Key& operator=(const Key& o) {
    CountCopy();
    id = o.id;
    return *this;
  }
  Key& operator=(Key&& o) noexcept {
    id = o.id;
    return *this;
  }
  bool operator==(const Key& o) const { return id == o.id; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return absl::Hash<int>()(k.id); }
};

// A value stored by node: a heap string, whose copy may throw.
struct HeapValue {
  std::string text;
  explicit HeapValue(std::uint64_t v) : text(std::to_string(v)) {}
  HeapValue(const HeapValue& o) : text(o.text) { CountCopy(); }
  HeapValue(HeapValue&& o) noexcept : text(std::move(o.text)) {}
  HeapValue& operator=(const HeapValue& o) {
    CountCopy();
    text = o.text;
    return *this;
  }
  HeapValue& operator=(HeapValue&& o) noexcept {
    text = std::move(o.text);
    return *this;
  }
  std::uint64_t number() const { return std::stoull(text); }
};

std::uint64_t NumberOf(std::uint64_t v) { return v; }
std::uint64_t NumberOf(const HeapValue& v) { return v.number(); }

struct Params {
  bool bounded;
  bool sliding;
};

// One cache of Key -> V on a ManualTicker (1 s ticks, 10 s ttl), whose
// listener records every value it hears.
template <typename V>
class Harness {
 public:
  using TestCache = Cache<Key, V, KeyHash>;
  static constexpr std::size_t kCapacity = 128;  // one shard

  explicit Harness(Params p) {
    CacheOptions o;
    o.ttl = absl::Seconds(10);
    o.sliding = p.sliding;
    o.max_entries = p.bounded ? kCapacity : 0;
    o.wheel.interval = absl::Seconds(1);
    o.wheel.ticker = ticker;
    auto c = TestCache::Create(o, [this](Key k, V v, RemovalCause cause) {
      std::lock_guard<std::mutex> lock(mu);
      heard.push_back({k.id, NumberOf(v), cause});
    });
    EXPECT_TRUE(c.ok()) << c.status();
    cache = *std::move(c);
  }

  struct Heard {
    int key;
    std::uint64_t value;
    RemovalCause cause;
  };

  absl::Status Set(int k, std::uint64_t v,
                   absl::Duration ttl = absl::Seconds(10)) {
    set_values.push_back(v);
    return cache->Set(Key(k), V(v), ttl);
  }
  std::optional<std::uint64_t> Get(int k) {
    std::optional<V> v = cache->Get(Key(k));
    if (!v.has_value()) return std::nullopt;
    return NumberOf(*v);
  }
  std::size_t HeardCount() {
    std::lock_guard<std::mutex> lock(mu);
    return heard.size();
  }
  // The cache is whole: its invariants hold, and (after a Clear) every
  // value ever accepted was heard exactly once, but for `never_accepted`.
  void ExpectAccounted(const std::vector<std::uint64_t>& never_accepted = {}) {
    ASSERT_EQ(CacheTestPeer::CheckInvariants(*cache), absl::OkStatus());
    cache->Clear();
    ASSERT_EQ(CacheTestPeer::CheckInvariants(*cache), absl::OkStatus());
    std::map<std::uint64_t, int> expected, got;
    for (std::uint64_t v : set_values) ++expected[v];
    for (std::uint64_t v : never_accepted) {
      if (--expected[v] == 0) expected.erase(v);
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const Heard& h : heard) ++got[h.value];
    EXPECT_EQ(got, expected);
  }

  std::shared_ptr<ManualTicker> ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<Heard> heard;
  std::vector<std::uint64_t> set_values;
  std::unique_ptr<TestCache> cache;
};

// Runs `op` on a fresh cache made by `setup` once for each copy `op`
// makes, the n-th copy throwing on the n-th run, until a run makes no
// copy that throws. A run that throws must leave the cache as `setup` left
// it (`unchanged`), one that returns as `op` should (`done`); either way
// every value accepted is heard exactly once by the end (ExpectAccounted;
// a value given to a call that threw was never accepted).
template <typename V>
void ThrowAtEachCopy(Params p, const std::function<void(Harness<V>&)>& setup,
                     const std::function<void(Harness<V>&)>& op,
                     const std::function<void(Harness<V>&)>& unchanged,
                     const std::function<void(Harness<V>&)>& done,
                     bool whole = true) {
  for (int n = 0;; ++n) {
    SCOPED_TRACE(::testing::Message() << "the copy that throws: " << n);
    Harness<V> h(p);
    setup(h);
    const std::size_t heard = h.HeardCount();
    const std::size_t accepted = h.set_values.size();
    bool threw = false;
    throws.store(0);
    {
      ThrowOnCopy arm(n);
      try {
        op(h);
      } catch (const std::runtime_error&) {
        threw = true;
      }
    }
    ASSERT_EQ(CacheTestPeer::CheckInvariants(*h.cache), absl::OkStatus());
    std::vector<std::uint64_t> never_accepted;
    if (threw) {
      if (whole) {
        EXPECT_EQ(h.HeardCount(), heard);
      }
      never_accepted.assign(h.set_values.begin() + accepted,
                            h.set_values.end());
      unchanged(h);
    } else {
      done(h);
    }
    h.ExpectAccounted(never_accepted);
    if (!threw) {
      EXPECT_GT(n, 0) << "no copy threw: the op makes no copy to test";
      return;
    }
    ASSERT_LT(n, 16) << "more copies than any write makes";
  }
}

template <typename V>
class CacheExceptionsTest : public ::testing::TestWithParam<Params> {
 public:
  using Value = V;
  using H = Harness<V>;
  void SetUp() override { copies_left.store(-1); }
  void Run(const std::function<void(H&)>& setup,
           const std::function<void(H&)>& op,
           const std::function<void(H&)>& unchanged,
           const std::function<void(H&)>& done, bool whole = true) {
    ThrowAtEachCopy<V>(GetParam(), setup, op, unchanged, done, whole);
  }
};

using InPlace = CacheExceptionsTest<std::uint64_t>;
using ByNode = CacheExceptionsTest<HeapValue>;

std::optional<std::uint64_t> Just(std::uint64_t v) { return v; }

// Replacing a present key: in place (a later deadline; values of one word;
// without a bound, by the Set without the lock), or by a new node (a
// shorter time to live, or a heap value).
template <typename T>
void Replace(T& t, absl::Duration ttl) {
  t.Run(
      [](auto& h) {
        ASSERT_TRUE(h.Set(1, 10).ok());
        h.ticker->Tick();
      },
      [ttl](auto& h) { h.Set(1, 11, ttl).IgnoreError(); },
      [](auto& h) { EXPECT_EQ(h.Get(1), Just(10)); },
      [](auto& h) {
        EXPECT_EQ(h.Get(1), Just(11));
        EXPECT_EQ(h.HeardCount(), 1u);
      });
}
TEST_P(InPlace, ReplaceInPlace) { Replace(*this, absl::Seconds(10)); }
TEST_P(InPlace, ReplaceByNewNode) { Replace(*this, absl::Seconds(2)); }
TEST_P(ByNode, ReplaceByNewNode) { Replace(*this, absl::Seconds(10)); }

template <typename T>
void Delete(T& t) {
  t.Run([](auto& h) { ASSERT_TRUE(h.Set(1, 10).ok()); },
        [](auto& h) { EXPECT_TRUE(h.cache->Delete(Key(1))); },
        [](auto& h) { EXPECT_EQ(h.Get(1), Just(10)); },
        [](auto& h) {
          EXPECT_EQ(h.Get(1), std::nullopt);
          EXPECT_EQ(h.HeardCount(), 1u);
        });
}
TEST_P(InPlace, Delete) { Delete(*this); }
TEST_P(ByNode, Delete) { Delete(*this); }

// Clear goes shard by shard, each whole: a throw leaves the shards before
// it cleared (their values heard) and the rest as they were.
template <typename T>
void Clear(T& t) {
  t.Run(
      [](auto& h) {
        for (int k = 1; k <= 5; ++k) ASSERT_TRUE(h.Set(k, 10 * k).ok());
      },
      [](auto& h) { h.cache->Clear(); },
      [](auto& h) {
        EXPECT_EQ(h.cache->size() + h.HeardCount(), 5u);
        std::size_t present = 0;
        for (int k = 1; k <= 5; ++k) {
          const auto v = h.Get(k);
          if (v.has_value()) {
            EXPECT_EQ(v, Just(10 * k));
          }
          present += v.has_value();
        }
        EXPECT_EQ(present, h.cache->size());
      },
      [](auto& h) {
        EXPECT_EQ(h.cache->size(), 0u);
        EXPECT_EQ(h.HeardCount(), 5u);
      },
      /*whole=*/false);
}
TEST_P(InPlace, Clear) { Clear(*this); }
TEST_P(ByNode, Clear) { Clear(*this); }

// Expiry runs on the wheel's worker, with no caller to take the
// exception: what is left of the bucket is tried again an interval later,
// and each value is heard once, as expired.
template <typename T>
void Expiry(T& t) {
  for (int n = 0;; ++n) {
    SCOPED_TRACE(::testing::Message() << "the copy that throws: " << n);
    typename T::H h(t.GetParam());
    ASSERT_TRUE(h.Set(1, 10, absl::Seconds(2)).ok());
    ASSERT_TRUE(h.Set(2, 20, absl::Seconds(2)).ok());
    throws.store(0);
    {
      ThrowOnCopy arm(n);
      h.ticker->Tick(2);  // the tick's expiry runs before Tick returns
    }
    EXPECT_EQ(h.Get(1), std::nullopt);  // past its deadline all the same
    EXPECT_EQ(h.Get(2), std::nullopt);
    h.ticker->Tick();  // what is left of the bucket, tried again
    ASSERT_EQ(CacheTestPeer::CheckInvariants(*h.cache), absl::OkStatus());
    EXPECT_EQ(h.cache->size(), 0u);
    {
      std::lock_guard<std::mutex> lock(h.mu);
      ASSERT_EQ(h.heard.size(), 2u);
      for (const auto& heard : h.heard) {
        EXPECT_EQ(heard.cause, RemovalCause::kExpired);
      }
    }
    h.ExpectAccounted();
    if (throws.load() == 0) return;
    ASSERT_LT(n, 16);
  }
}
TEST_P(InPlace, Expiry) { Expiry(*this); }
TEST_P(ByNode, Expiry) { Expiry(*this); }

// The load's flight and the store after it copy the key (and value): a
// throw reaches the GetOrLoad caller and leaves no load open.
template <typename T>
void LoadAndStore(T& t) {
  using V = typename T::Value;
  t.Run([](auto&) {},
        [](auto& h) {
          auto loaded = h.cache->GetOrLoad(
              Key(1), [] { return absl::StatusOr<V>(V(7)); });
          ASSERT_TRUE(loaded.ok());
          h.set_values.push_back(7);
        },
        [](auto& h) { EXPECT_EQ(h.Get(1), std::nullopt); },
        [](auto& h) { EXPECT_EQ(h.Get(1), Just(7)); });
}
TEST_P(InPlace, LoadAndStore) { LoadAndStore(*this); }
TEST_P(ByNode, LoadAndStore) { LoadAndStore(*this); }

// A sliding hit whose value copy throws does not slide.
TEST_P(ByNode, Slide) {
  if (!GetParam().sliding) GTEST_SKIP() << "sliding only";
  Run(
      [](H& h) {
        ASSERT_TRUE(h.Set(1, 10, absl::Seconds(3)).ok());
        h.ticker->Tick(2);
      },
      [](H& h) { EXPECT_EQ(h.Get(1), Just(10)); },
      [](H& h) {
        h.ticker->Tick();  // 3 s: due, unless the throwing Get slid it
        EXPECT_EQ(h.Get(1), std::nullopt);
      },
      [](H& h) {
        h.ticker->Tick();  // slid to 5 s by the Get
        EXPECT_EQ(h.Get(1), Just(10));
      });
}

// A full bounded shard takes a new key: if the victim's record throws,
// the insert is undone.
template <typename T>
void Eviction(T& t) {
  constexpr int n = 128;  // Harness::kCapacity
  t.Run(
      [](auto& h) {
        for (int k = 0; k < n; ++k) ASSERT_TRUE(h.Set(k, 1000 + k).ok());
      },
      [](auto& h) { h.Set(n, 5000).IgnoreError(); },
      [](auto& h) {
        EXPECT_EQ(h.cache->size(), std::size_t{n});
        EXPECT_EQ(h.Get(n), std::nullopt);
        for (int k = 0; k < n; ++k) EXPECT_EQ(h.Get(k), Just(1000 + k)) << k;
      },
      [](auto& h) {
        EXPECT_EQ(h.cache->size(), std::size_t{n});
        EXPECT_EQ(h.Get(n), Just(5000));
        EXPECT_EQ(h.HeardCount(), 1u);
      });
}
TEST_P(InPlace, Eviction) {
  if (!GetParam().bounded) GTEST_SKIP() << "bounded only";
  Eviction(*this);
}
TEST_P(ByNode, Eviction) {
  if (!GetParam().bounded) GTEST_SKIP() << "bounded only";
  Eviction(*this);
}

// Every cache shape: bounded or not, sliding or not.
const auto kShapes =
    ::testing::Values(Params{false, false}, Params{true, false},
                      Params{false, true}, Params{true, true});
std::string ShapeName(const ::testing::TestParamInfo<Params>& info) {
  return std::string(info.param.bounded ? "Bounded" : "Unbounded") +
         (info.param.sliding ? "Sliding" : "");
}
INSTANTIATE_TEST_SUITE_P(Caches, InPlace, kShapes, ShapeName);
INSTANTIATE_TEST_SUITE_P(Caches, ByNode, kShapes, ShapeName);

}  // namespace cache_exceptions_test
}  // namespace internal
}  // namespace timingwheel
