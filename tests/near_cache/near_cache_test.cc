// The near cache against a real redis-server: reads, writes, invalidations
// from another instance, GetMany, FLUSHALL, a full tracking table,
// broadcast mode, and the errors that must be statuses, not crashes.
#include "near_cache/near_cache.h"

#include <signal.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/near_cache/fixture.h"

namespace near_cache {
namespace {

using NearCacheBasics = NearCacheTest;

TEST_F(NearCacheBasics, ReadsThroughOnceThenServesTheLocalCopy) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  ClientSet("k", "v1");
  EXPECT_EQ(Read(*a, "k"), "v1");
  EXPECT_TRUE(a->Cached("k"));
  EXPECT_EQ(Read(*a, "k"), "v1");
  EXPECT_EQ(Read(*a, "absent"), std::nullopt);  // a missing key is kept too
  EXPECT_TRUE(a->Cached("absent"));
  const NearCacheStats s = a->stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.kept, 2u);
  EXPECT_TRUE(s.tracking);
  EXPECT_EQ(s.sessions, 1u);
}

// Two instances on their own connections: once B's Set has returned and A
// has applied its invalidation, A never returns the old value.
TEST_F(NearCacheBasics, AnotherInstancesSetIsSeenOnceItsInvalidationIsIn) {
  auto a = Make();
  auto b = Make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int round = 0; round < 200; ++round) {
    const std::string key = absl::StrCat("k", round % 4);
    ASSERT_TRUE(Read(*a, key).has_value() || round < 4);
    ASSERT_TRUE(a->Cached(key));
    const std::string value = absl::StrCat("v", round);
    const absl::Time start = absl::Now();
    ASSERT_TRUE(b->Set(key, value).ok());
    history_.Wrote(key, value, start, absl::Now());
    ASSERT_TRUE(WaitUntil([&] { return !a->Cached(key); })) << round;
    ASSERT_EQ(Read(*a, key), value) << round;
  }
  EXPECT_EQ(history_.Violations(absl::ZeroDuration()),
            std::vector<std::string>{});
  EXPECT_GE(a->stats().invalidations, 200u);
}

TEST_F(NearCacheBasics, SetAndDeleteWriteThroughAndDropTheLocalCopy) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->Set("k", "v1").ok());
  EXPECT_EQ(Read(*a, "k"), "v1");
  ASSERT_TRUE(a->Set("k", "v2").ok());
  EXPECT_FALSE(a->Cached("k"));  // dropped before Set returned
  EXPECT_EQ(Read(*a, "k"), "v2");
  absl::StatusOr<bool> deleted = a->Delete("k");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_FALSE(a->Cached("k"));
  EXPECT_EQ(Read(*a, "k"), std::nullopt);
  deleted = a->Delete("k");
  ASSERT_TRUE(deleted.ok());
  EXPECT_FALSE(*deleted);
  // Binary-safe values.
  const std::string bytes("a\0b\r\n", 5);
  ASSERT_TRUE(a->Set("bin", bytes).ok());
  EXPECT_EQ(Read(*a, "bin"), bytes);
  EXPECT_EQ(Read(*a, "bin"), bytes);
}

TEST_F(NearCacheBasics, GetManyPipelinesOnlyTheMisses) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) {
    keys.push_back(absl::StrCat("k", i));
    if (i % 3 != 0) ClientSet(keys.back(), absl::StrCat("v", i));
  }
  for (int i = 0; i < 50; ++i) Read(*a, keys[i]);
  const NearCacheStats before = a->stats();
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      a->GetMany(keys);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), keys.size());
  for (int i = 0; i < 100; ++i) {
    if (i % 3 == 0) {
      EXPECT_EQ((*values)[i], std::nullopt) << i;
    } else {
      EXPECT_EQ((*values)[i], absl::StrCat("v", i)) << i;
    }
    EXPECT_TRUE(a->Cached(keys[i])) << i;
  }
  const NearCacheStats after = a->stats();
  EXPECT_EQ(after.hits - before.hits, 50u);
  EXPECT_EQ(after.misses - before.misses, 50u);
  // The kept copies are tracked: another client's write drops them.
  ClientSet("k99", "new");
  ASSERT_TRUE(WaitUntil([&] { return !a->Cached("k99"); }));
  EXPECT_EQ(Read(*a, "k99"), "new");
}

TEST_F(NearCacheBasics, FlushAllDropsEveryLocalCopy) {
  auto a = Make();
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 20; ++i) Read(*a, absl::StrCat("k", i));
  ASSERT_EQ(a->stats().local_entries, 20u);
  ASSERT_NE(Call({"FLUSHALL"}), nullptr);
  ASSERT_TRUE(WaitUntil([&] { return a->stats().flushes >= 1; }));
  EXPECT_EQ(a->stats().local_entries, 0u);
  EXPECT_EQ(a->stats().link_losses, 0u);
}

// Redis forgets tracked keys beyond tracking-table-max-keys, and sends
// their invalidations as it does: the near cache must drop those copies,
// since no later write of theirs will be announced.
TEST_F(NearCacheBasics, AFullTrackingTableInvalidatesWhatItForgets) {
  ASSERT_NE(Call({"CONFIG", "SET", "tracking-table-max-keys", "10"}), nullptr);
  auto a = Make();
  ASSERT_NE(a, nullptr);
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) {
    keys.push_back(absl::StrCat("k", i));
    ClientSet(keys.back(), "old");
  }
  for (const std::string& key : keys) Read(*a, key);
  ASSERT_TRUE(WaitUntil([&] { return a->stats().invalidations >= 190; }))
      << a->stats().invalidations;
  EXPECT_LE(a->stats().local_entries, 10u);
  for (const std::string& key : keys) ClientSet(key, "new");
  ASSERT_TRUE(WaitUntil([&] { return a->stats().local_entries == 0; }));
  for (const std::string& key : keys) EXPECT_EQ(Read(*a, key), "new") << key;
  EXPECT_EQ(history_.Violations(absl::ZeroDuration()),
            std::vector<std::string>{});
}

TEST_F(NearCacheBasics, BroadcastModeKeepsOnlyKeysUnderItsPrefixes) {
  NearCacheOptions options = Options();
  options.bcast_prefixes = {"user:", "item:"};
  auto a = Make(options);
  ASSERT_NE(a, nullptr);
  ClientSet("user:1", "u1");
  ClientSet("other", "o1");
  // Announced although A never read it; a Get it overlaps keeps nothing.
  ASSERT_TRUE(WaitUntil([&] { return a->stats().invalidations == 1; }));
  EXPECT_EQ(Read(*a, "user:1"), "u1");
  EXPECT_EQ(Read(*a, "other"), "o1");
  EXPECT_TRUE(a->Cached("user:1"));
  EXPECT_FALSE(a->Cached("other"));  // no invalidation would come for it
  ClientSet("user:1", "u2");
  ASSERT_TRUE(WaitUntil([&] { return !a->Cached("user:1"); }));
  EXPECT_EQ(Read(*a, "user:1"), "u2");
  // Every write under a prefix is announced, read or not.
  const std::uint64_t before = a->stats().invalidations;
  ClientSet("item:never-read", "x");
  ASSERT_TRUE(WaitUntil([&] { return a->stats().invalidations > before; }));
  EXPECT_EQ(history_.Violations(absl::ZeroDuration()),
            std::vector<std::string>{});
}

// A Redis that stops answering but keeps its sockets open (SIGSTOP, as a
// host that vanished without a FIN): the heartbeat finds it and the copies
// go; once it answers again the cache reconnects.
TEST_F(NearCacheBasics, ASilentServerIsFoundByTheHeartbeat) {
  NearCacheOptions options = Options();
  options.heartbeat = absl::Milliseconds(100);
  options.io_timeout = absl::Milliseconds(200);
  auto a = Make(options);
  ASSERT_NE(a, nullptr);
  ClientSet("k", "v1");
  EXPECT_EQ(Read(*a, "k"), "v1");
  ASSERT_TRUE(a->Cached("k"));
  ASSERT_EQ(kill(server_->pid(), SIGSTOP), 0);
  const bool found = WaitUntil([&] { return !a->stats().tracking; });
  kill(server_->pid(), SIGCONT);
  ASSERT_TRUE(found);
  EXPECT_FALSE(a->Cached("k"));
  EXPECT_GE(a->stats().flushes, 1u);
  ASSERT_TRUE(WaitUntil([&] { return a->stats().tracking; }));
  ClientSet("k", "v2");
  EXPECT_EQ(Read(*a, "k"), "v2");
}

TEST_F(NearCacheBasics, BadOptionsAreInvalidArgument) {
  auto refused = [&](auto change) {
    NearCacheOptions options = Options();
    change(options);
    absl::StatusOr<std::unique_ptr<NearCache>> c = NearCache::Create(options);
    return absl::IsInvalidArgument(c.status()) ? std::string()
                                               : c.status().ToString();
  };
  EXPECT_EQ(refused([](auto& o) { o.host = ""; }), "");
  EXPECT_EQ(refused([](auto& o) { o.port = 0; }), "");
  EXPECT_EQ(refused([](auto& o) { o.port = 70000; }), "");
  EXPECT_EQ(refused([](auto& o) { o.ttl = absl::ZeroDuration(); }), "");
  EXPECT_EQ(refused([](auto& o) { o.io_timeout = absl::ZeroDuration(); }), "");
  EXPECT_EQ(refused([](auto& o) { o.heartbeat = absl::InfiniteDuration(); }),
            "");
  EXPECT_EQ(refused([](auto& o) { o.reconnect_min = -absl::Seconds(1); }), "");
  EXPECT_EQ(refused([](auto& o) {
              o.reconnect_min = absl::Seconds(2);
              o.reconnect_max = absl::Seconds(1);
            }),
            "");
  EXPECT_EQ(refused([](auto& o) { o.max_links = 0; }), "");
  EXPECT_EQ(refused([](auto& o) {
              o.bcast_prefixes = {"user:", "user:1"};
            }),
            "");
  EXPECT_EQ(refused([](auto& o) { o.bcast_prefixes = {"a", "a"}; }), "");
}

TEST_F(NearCacheBasics, UnreachableRedisIsUnavailableAtCreate) {
  NearCacheOptions options = Options();
  server_->Kill();
  options.io_timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<NearCache>> c = NearCache::Create(options);
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_LT(absl::Now() - start, kPatience);
}

TEST_F(NearCacheBasics, RedisRefusingTheSetupIsFailedPrecondition) {
  ASSERT_NE(Call({"CONFIG", "SET", "requirepass", "secret"}), nullptr);
  absl::StatusOr<std::unique_ptr<NearCache>> c = NearCache::Create(Options());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "NOAUTH")) << c.status();
}

TEST_F(NearCacheBasics, RedisErrorsAndALostServerAreStatuses) {
  NearCacheOptions options = Options();
  options.io_timeout = absl::Milliseconds(500);
  auto a = Make(options);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(Call({"RPUSH", "list", "x"}), nullptr);
  absl::StatusOr<std::optional<std::string>> v = a->Get("list");
  EXPECT_TRUE(absl::IsFailedPrecondition(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "WRONGTYPE"));
  absl::StatusOr<std::vector<std::optional<std::string>>> many =
      a->GetMany({"k", "list", "k2"});
  EXPECT_TRUE(absl::IsFailedPrecondition(many.status())) << many.status();
  // The replies after the error were read too: the link is in step for the
  // next caller (the same one: the pool gives back the last link returned).
  ClientSet("after", "x");
  EXPECT_EQ(Read(*a, "after"), "x");

  // Redis gone: every call fails within the timeout, none hangs or crashes.
  server_->Kill();
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsUnavailable(a->Get("never-read").status()))
      << a->Get("never-read").status();
  EXPECT_TRUE(absl::IsUnavailable(a->Set("k", "v")));
  EXPECT_TRUE(absl::IsUnavailable(a->Delete("k").status()));
  EXPECT_TRUE(absl::IsUnavailable(a->GetMany({"a", "b"}).status()));
  EXPECT_LT(absl::Now() - start, kPatience);
  ASSERT_TRUE(WaitUntil([&] { return !a->stats().tracking; }));

  // And back: it reconnects by itself.
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(WaitUntil([&] { return a->stats().tracking; }));
  ASSERT_TRUE(a->Set("k", "back").ok());
  EXPECT_EQ(Read(*a, "k"), "back");
  EXPECT_EQ(Read(*a, "k"), "back");
  EXPECT_TRUE(a->Cached("k"));
}

}  // namespace
}  // namespace near_cache
