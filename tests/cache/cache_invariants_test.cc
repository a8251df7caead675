// A cache's CheckInvariants (each shard's: pool, index, buckets, policy)
// catches what it is there for. Each test fills a one-shard cache, checks
// that CheckInvariants passes, breaks one thing in the shard on purpose
// (under its lock, through CacheTestPeer), checks that CheckInvariants
// reports it, then repairs it so the cache can be destroyed. The model test
// runs the check after every operation; these show that a pass means
// something.
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {
namespace cache_invariants_test {

using IntCache = Cache<int, int>;
using Shard = CacheShard<int, int, absl::Hash<int>, std::equal_to<int>>;
using Node = CacheNode<int, int>;

// Expects a failed check whose message contains `what`.
void ExpectCaught(const absl::Status& status, absl::string_view what) {
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(what), absl::string_view::npos) << status;
}

// A cache of one shard (bounded below twice the per-shard minimum), its
// time a ManualTicker's: keys 1 to 4 set with a ttl of 3 ticks share one
// expiry bucket, and nothing expires while a test runs.
class CacheInvariantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheOptions options;
    options.ttl = absl::Seconds(3);
    options.max_entries = 200;
    options.wheel.interval = absl::Seconds(1);
    options.wheel.ticker = std::make_shared<ManualTicker>();
    auto cache = IntCache::Create(options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
    ASSERT_EQ(CacheTestPeer::Shards(*cache_), 1u);
    for (int k = 1; k <= 4; ++k) ASSERT_TRUE(cache_->Set(k, 10 * k).ok());
    ASSERT_EQ(cache_->Get(2), 20);  // a hit: node 2 moves in the policy
    ASSERT_EQ(CacheTestPeer::CheckInvariants(*cache_), absl::OkStatus());
  }

  Shard& shard() { return CacheTestPeer::Shard(*cache_, 0); }
  absl::Status Check() { return CacheTestPeer::CheckInvariants(*cache_); }

  // The node of a present key.
  std::uint32_t NodeOf(int key) {
    Shard& s = shard();
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    std::uint32_t found = kCacheNil;
    for (std::uint32_t i = 0; i < CacheTestPeer::Pool(s).extent(); ++i) {
      if (CacheTestPeer::Pool(s).at(i).is_entry() &&
          CacheTestPeer::Pool(s).at(i).key() == key)
        found = i;
    }
    return found;
  }

  // Sets node's deadline to `broken`, expects a check to report `what`,
  // then puts the deadline back and expects the check to pass.
  void ExpectCaughtWithDeadline(std::uint32_t node, std::int64_t broken,
                                absl::string_view what) {
    Shard& s = shard();
    std::int64_t deadline;
    {
      CacheMutexLock lock(CacheTestPeer::Mu(s));
      deadline = CacheTestPeer::Pool(s).at(node).deadline.Peek();
      CacheTestPeer::SetWord(CacheTestPeer::Pool(s).at(node).deadline, broken);
    }
    ExpectCaught(Check(), what);
    {
      CacheMutexLock lock(CacheTestPeer::Mu(s));
      CacheTestPeer::SetWord(CacheTestPeer::Pool(s).at(node).deadline,
                             deadline);
    }
    EXPECT_EQ(Check(), absl::OkStatus());
  }

  std::unique_ptr<IntCache> cache_;
};

TEST_F(CacheInvariantsTest, HoldThroughOperations) {
  ASSERT_TRUE(cache_->Set(5, 50, absl::InfiniteDuration()).ok());
  EXPECT_TRUE(cache_->Delete(3));
  EXPECT_EQ(Check(), absl::OkStatus());
  auto loaded = cache_->GetOrLoad(6, [] { return absl::StatusOr<int>(60); });
  EXPECT_EQ(loaded.value_or(0), 60);
  EXPECT_EQ(Check(), absl::OkStatus());
  cache_->Clear();
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchABrokenBucketLink) {
  const std::uint32_t node = NodeOf(3);
  Shard& s = shard();
  std::uint32_t eprev;
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    eprev = CacheTestPeer::Pool(s).at(node).eprev;
    CacheTestPeer::Pool(s).at(node).eprev = node;  // points at itself
  }
  ExpectCaught(Check(), "links back to");
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    CacheTestPeer::Pool(s).at(node).eprev = eprev;
  }
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchANodeInTwoBuckets) {
  const std::uint32_t node = NodeOf(1);
  ASSERT_TRUE(cache_->Set(9, 90, absl::Seconds(5)).ok());  // a second bucket
  Shard& s = shard();
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    ASSERT_EQ(CacheTestPeer::Buckets(s).size(), 2u);
    // The second bucket's sentinel, which 9's node alone links to.
    std::uint32_t sentinel = kCacheNil;
    for (const auto& [tick, b] : CacheTestPeer::Buckets(s)) {
      if (CacheTestPeer::Pool(s).at(CacheTestPeer::Pool(s).at(b).enext).key() ==
          9)
        sentinel = b;
    }
    ASSERT_NE(sentinel, kCacheNil);
    CacheTestPeer::Pool(s).at(sentinel).enext =
        node;  // node 1's bucket's list, entered
  }
  ExpectCaught(Check(), "links back to");
  // Deleting 9 unlinks its node, which rewrites the sentinel's link.
  ASSERT_TRUE(cache_->Delete(9));
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchAnIndexHoldingANodeTwice) {
  const std::uint32_t node = NodeOf(4);
  // The copy goes under the key's own tag: it lands after the original in
  // the same probe run, so the Erase below takes out the original, whatever
  // the process's hash seed, and the run closes up over it.
  const auto tag = static_cast<std::uint32_t>(
      MixHash(static_cast<std::uint64_t>(absl::Hash<int>()(4))));
  Shard& s = shard();
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    CacheTestPeer::Index(s).Insert(tag, node);
  }
  ExpectCaught(Check(), "is held twice");
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    CacheTestPeer::Index(s).Erase(tag, node);
  }
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchAFreeNodeOffTheFreeList) {
  ExpectCaughtWithDeadline(NodeOf(2), Node::kFree, "is not on the free list");
}

// A Set storing a value in place marks the node only for the few
// instructions of its write: a mark left behind would send every Get to
// the lock, and every writer there waiting, for good.
TEST_F(CacheInvariantsTest, CatchAWriteMarkLeftBehind) {
  static_assert(Node::kValueInPlace);
  ExpectCaughtWithDeadline(NodeOf(2), Node::kWriting,
                           "is marked as being written");
}

// A load count left up would send the shard's Sets to the lock for good.
TEST_F(CacheInvariantsTest, CatchALoadCountWithoutAFlight) {
  Shard& s = shard();
  CacheTestPeer::LoadsOpen(s).fetch_add(1);
  ExpectCaught(Check(), "loads open for 0 flights");
  CacheTestPeer::LoadsOpen(s).fetch_sub(1);
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchAPolicySegmentMislabelled) {
  const std::uint32_t node = NodeOf(2);
  Shard& s = shard();
  int segment;
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    segment = CacheTestPeer::Pool(s).extra(node).segment();
    CacheTestPeer::Pool(s).extra(node).set_segment(segment == 0 ? 1 : 0);
  }
  ExpectCaught(Check(), "CachePolicy: node");
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    CacheTestPeer::Pool(s).extra(node).set_segment(segment);
  }
  EXPECT_EQ(Check(), absl::OkStatus());
}

TEST_F(CacheInvariantsTest, CatchABucketWithoutASentinel) {
  const std::uint32_t node = NodeOf(1);
  Shard& s = shard();
  std::uint32_t sentinel;
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    ASSERT_EQ(CacheTestPeer::Buckets(s).size(), 1u);
    sentinel = CacheTestPeer::Buckets(s).begin()->second;
    CacheTestPeer::Buckets(s).begin()->second = node;
  }
  ExpectCaught(Check(), "is not one");
  {
    CacheMutexLock lock(CacheTestPeer::Mu(s));
    CacheTestPeer::Buckets(s).begin()->second = sentinel;
  }
  EXPECT_EQ(Check(), absl::OkStatus());
}

}  // namespace cache_invariants_test
}  // namespace internal
}  // namespace timingwheel
