// The lease keeper example against a real redis-server, started by each test
// on a loopback port with a temporary directory.
#include "lease/lease_keeper.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "lease/redis_link.h"
#include "lease/redis_server.h"

namespace lease {
namespace {

class LeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start();
    if (absl::IsNotFound(server.status())) GTEST_SKIP() << server.status();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<RedisLink>("127.0.0.1", server_->port(),
                                          absl::Seconds(5));
  }

  KeeperOptions Options(absl::Duration ttl) {
    KeeperOptions options;
    options.port = server_->port();
    options.ttl = ttl;
    options.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_.push_back(line);
    };
    return options;
  }

  std::unique_ptr<LeaseKeeper> Keeper(KeeperOptions options) {
    absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper =
        LeaseKeeper::Create(std::move(options));
    EXPECT_TRUE(keeper.ok()) << keeper.status();
    return keeper.ok() ? std::move(*keeper) : nullptr;
  }

  // How many of `names` exist now, by a pipelined EXISTS each (which also
  // expires a key past its time, so this is exact).
  std::size_t Existing(const std::vector<std::string>& names) {
    EXPECT_TRUE(client_->Connect().ok());
    for (const std::string& name : names) client_->Append({"EXISTS", name});
    std::size_t n = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      absl::StatusOr<Reply> reply = client_->Read();
      EXPECT_TRUE(reply.ok()) << reply.status();
      if (reply.ok() && (*reply)->integer == 1) ++n;
    }
    return n;
  }

  Reply Call(std::initializer_list<absl::string_view> args) {
    absl::StatusOr<Reply> reply = client_->Call(args);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? std::move(*reply) : nullptr;
  }

  std::string Get(const std::string& name) {
    Reply reply = Call({"GET", name});
    if (reply == nullptr || reply->type != REDIS_REPLY_STRING) return "(nil)";
    return std::string(reply->str, reply->len);
  }

  std::size_t LogLinesContaining(absl::string_view text) {
    std::lock_guard lock(log_mu_);
    std::size_t n = 0;
    for (const std::string& line : log_) n += absl::StrContains(line, text);
    return n;
  }

  static std::vector<std::string> Names(int n, absl::string_view prefix) {
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.push_back(absl::StrCat(prefix, i));
    return names;
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisLink> client_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(LeaseKeeperTest, HoldsTenThousandLocksForThreeTtlsThenTheyExpire) {
  const absl::Duration ttl = absl::Seconds(2);
  auto keeper = Keeper(Options(ttl));
  ASSERT_NE(keeper, nullptr);
  const std::vector<std::string> names = Names(10'000, "lease/session-");
  absl::StatusOr<std::size_t> taken = keeper->AcquireMany(names);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(*taken, names.size());

  // Without renewals every key would be gone after one ttl.
  const absl::Time until = absl::Now() + 3 * ttl;
  int checks = 0;
  while (absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(250));
    ASSERT_EQ(Existing(names), names.size()) << "check " << checks;
    ++checks;
  }
  KeeperStats s = keeper->stats();
  EXPECT_EQ(s.held, names.size());
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.renew_failures, 0u);
  // 3 ttl at one renewal per ttl / 3: about 9 a lock; fewer if late.
  EXPECT_GE(s.renewals, 6 * names.size());
  EXPECT_EQ(s.renew_lateness.count, s.renewals);
  EXPECT_LT(s.renew_lateness.max, ttl - ttl / 3);

  // As a crashed holder: nothing is deleted, and nothing renewed again.
  keeper->Abandon();
  const absl::Time abandoned = absl::Now();
  EXPECT_EQ(Existing(names), names.size());
  absl::SleepFor(abandoned + ttl + keeper->options().tick +
                 absl::Milliseconds(50) - absl::Now());
  EXPECT_EQ(Existing(names), 0u);
  EXPECT_EQ(keeper->stats().lost, 0u);
}

TEST_F(LeaseKeeperTest, ALockTakenOverIsNeitherRenewedNorDeleted) {
  std::vector<std::string> lost;
  std::mutex lost_mu;
  KeeperOptions options = Options(absl::Milliseconds(600));
  options.on_lost = [&](const std::string& name) {
    std::lock_guard lock(lost_mu);
    lost.push_back(name);
  };
  auto keeper = Keeper(options);
  ASSERT_NE(keeper, nullptr);
  ASSERT_EQ(keeper->Acquire("a").value_or(false), true);
  ASSERT_EQ(keeper->Acquire("held-elsewhere").value_or(false), true);

  // As if "a" had expired and another holder had taken it.
  Call({"SET", "a", "other-token", "PX", "60000"});
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (keeper->Holds("a") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(keeper->Holds("a"));
  absl::SleepFor(absl::Seconds(1));  // five more renewal periods
  EXPECT_EQ(Get("a"), "other-token");
  EXPECT_GT(Call({"PTTL", "a"})->integer, 50'000);  // not cut to 600 ms
  {
    std::lock_guard lock(lost_mu);
    EXPECT_EQ(lost, std::vector<std::string>{"a"});
  }
  EXPECT_EQ(keeper->stats().lost, 1u);
  EXPECT_TRUE(absl::IsNotFound(keeper->Release("a").status()));
  EXPECT_TRUE(keeper->Holds("held-elsewhere"));

  // Someone else's lock cannot be taken.
  EXPECT_EQ(keeper->Acquire("a").value_or(true), false);
  EXPECT_EQ(keeper->stats().refused, 1u);

  // Released after a takeover the keeper has not noticed yet (a long ttl, so
  // no renewal comes first): the other holder's key stays.
  auto slow = Keeper(Options(absl::Seconds(60)));
  ASSERT_NE(slow, nullptr);
  ASSERT_EQ(slow->Acquire("b").value_or(false), true);
  Call({"SET", "b", "other-token", "PX", "60000"});
  absl::StatusOr<bool> deleted = slow->Release("b");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);
  EXPECT_EQ(Get("b"), "other-token");
  EXPECT_EQ(slow->stats().released, 0u);
}

TEST_F(LeaseKeeperTest, ReleaseDeletesAndStopsRenewingAndTheNameCanComeBack) {
  auto keeper = Keeper(Options(absl::Milliseconds(600)));
  ASSERT_NE(keeper, nullptr);
  ASSERT_EQ(keeper->Acquire("x").value_or(false), true);
  ASSERT_EQ(keeper->Acquire("y").value_or(false), true);
  EXPECT_TRUE(absl::IsFailedPrecondition(keeper->Acquire("x").status()));
  absl::SleepFor(absl::Milliseconds(300));  // one renewal of each
  absl::StatusOr<bool> deleted = keeper->Release("x");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_EQ(Existing({"x"}), 0u);
  EXPECT_TRUE(absl::IsNotFound(keeper->Release("x").status()));

  // Took again at once: its timer is its own, whatever the old one did.
  ASSERT_EQ(keeper->Acquire("x").value_or(false), true);
  absl::SleepFor(absl::Milliseconds(1500));  // 2.5 ttl
  EXPECT_EQ(Existing({"x", "y"}), 2u);
  KeeperStats s = keeper->stats();
  EXPECT_EQ(s.held, 2u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.released, 1u);

  absl::StatusOr<std::size_t> all = keeper->ReleaseAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, 2u);
  EXPECT_EQ(Existing({"x", "y"}), 0u);
  EXPECT_EQ(keeper->stats().held, 0u);
}

TEST_F(LeaseKeeperTest, RedisRestartingCountsFailuresAndLosesLocksVisibly) {
  std::atomic<int> lost{0};
  KeeperOptions options = Options(absl::Milliseconds(900));
  options.retry_after = absl::Milliseconds(50);
  options.io_timeout = absl::Milliseconds(200);
  options.on_lost = [&](const std::string&) { lost.fetch_add(1); };
  auto keeper = Keeper(options);
  ASSERT_NE(keeper, nullptr);
  const std::vector<std::string> names = Names(1000, "lock-");
  ASSERT_EQ(keeper->AcquireMany(names).value_or(0), names.size());
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (keeper->stats().renewals < names.size() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // a renewal round goes through
  }
  EXPECT_GE(keeper->stats().renewals, names.size());

  server_->Kill();  // renewals and their retries now fail
  while (keeper->stats().renew_failures == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(keeper->stats().renew_failures, 0u);
  ASSERT_TRUE(server_->Restart().ok());  // empty: every lock is gone

  // Each lock is lost, either when the restarted server answers that its key
  // is gone or when its last known expiry passes first.
  while (keeper->stats().held > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  KeeperStats s = keeper->stats();
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.lost, names.size());  // counted as each left `held`
  // on_lost runs for a flight's losses after they are counted.
  while (lost.load() < static_cast<int>(names.size()) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(lost.load(), static_cast<int>(names.size()));
  EXPECT_GT(LogLinesContaining("got no answer"), 0u);
  EXPECT_EQ(Existing(names), 0u);

  // The keeper is still usable: a call's first try may find its old
  // connection dead (Unavailable), the next one connects again.
  absl::StatusOr<bool> again = keeper->Acquire("after-restart");
  if (!again.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(again.status())) << again.status();
    again = keeper->Acquire("after-restart");
  }
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again);
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_EQ(Existing({"after-restart"}), 1u);
  EXPECT_GE(keeper->stats().connects, 2u);
}

TEST_F(LeaseKeeperTest, ConcurrentAcquireAndReleaseLeaveNothingBehind) {
  // Renewed every 333 ms across the 2 s: a stall of the renewals of over
  // 600 ms (a loaded sanitizer run) would lose a lock.
  auto keeper = Keeper(Options(absl::Seconds(1)));
  ASSERT_NE(keeper, nullptr);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      const absl::Time until = absl::Now() + absl::Seconds(2);
      for (int round = 0; absl::Now() < until; ++round) {
        const std::string name = absl::StrCat("c-", (round + t) % 50);
        absl::StatusOr<bool> got = keeper->Acquire(name);
        if (!got.ok()) {
          errors += !absl::IsFailedPrecondition(got.status());
          continue;  // the other thread holds it in this keeper
        }
        if (!*got) continue;  // the key is still held: not released yet
        if (round % 3 != 0) continue;  // keep some across renewals
        absl::StatusOr<bool> released = keeper->Release(name);
        errors += !released.ok() && !absl::IsNotFound(released.status());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  KeeperStats s = keeper->stats();
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.renew_failures, 0u);
  absl::StatusOr<std::size_t> deleted = keeper->ReleaseAll();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, s.held);
  EXPECT_EQ(Existing(Names(50, "c-")), 0u);
}

TEST_F(LeaseKeeperTest, AnErrorReplyIsAClearStatusAndTakesNothing) {
  auto keeper = Keeper(Options(absl::Seconds(1)));
  ASSERT_NE(keeper, nullptr);
  ASSERT_EQ(keeper->Acquire("before").value_or(false), true);
  // A Redis out of memory refuses every write.
  Call({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  Call({"CONFIG", "SET", "maxmemory", "1"});
  absl::StatusOr<std::size_t> many = keeper->AcquireMany({"p", "q"});
  EXPECT_TRUE(absl::IsUnknown(many.status())) << many.status();
  EXPECT_TRUE(absl::StrContains(many.status().message(), "OOM"))
      << many.status();
  absl::StatusOr<bool> one = keeper->Acquire("r");
  EXPECT_TRUE(absl::IsUnknown(one.status())) << one.status();
  EXPECT_FALSE(keeper->Holds("p") || keeper->Holds("q") || keeper->Holds("r"));
  EXPECT_EQ(keeper->stats().held, 1u);

  Call({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(keeper->AcquireMany({"p", "q"}).value_or(0), 2u);
  EXPECT_EQ(keeper->stats().held, 3u);
}

TEST_F(LeaseKeeperTest, BadOptionsAndCallsGetClearStatuses) {
  KeeperOptions short_ttl = Options(absl::Milliseconds(5));
  EXPECT_TRUE(absl::IsInvalidArgument(LeaseKeeper::Create(short_ttl).status()));
  KeeperOptions slow_renewal = Options(absl::Seconds(1));
  slow_renewal.renew_every = absl::Seconds(1);
  EXPECT_TRUE(
      absl::IsInvalidArgument(LeaseKeeper::Create(slow_renewal).status()));
  KeeperOptions no_batch = Options(absl::Seconds(1));
  no_batch.batch = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(LeaseKeeper::Create(no_batch).status()));

  auto keeper = Keeper(Options(absl::Seconds(1)));
  ASSERT_NE(keeper, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(keeper->Acquire("").status()));
  EXPECT_TRUE(absl::IsNotFound(keeper->Release("never").status()));
  keeper->Abandon();
  EXPECT_TRUE(absl::IsFailedPrecondition(keeper->Acquire("late").status()));
  keeper->Abandon();  // idempotent

  // Nothing listens on a port just freed by a killed server.
  KeeperOptions nowhere = Options(absl::Seconds(1));
  server_->Kill();
  auto lonely = Keeper(nowhere);
  ASSERT_NE(lonely, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(lonely->Acquire("x").status()));
}

}  // namespace
}  // namespace lease
