// What the near cache's tests share: a throwaway redis-server per test (the
// lease example's), a plain client connection, near caches on it, and a
// bounded wait.
#ifndef TIMINGWHEEL_TESTS_NEAR_CACHE_FIXTURE_H_
#define TIMINGWHEEL_TESTS_NEAR_CACHE_FIXTURE_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "lease/redis_link.h"
#include "lease/redis_server.h"
#include "near_cache/near_cache.h"
#include "near_cache/near_cache_testing.h"
#include "tests/near_cache/history.h"

namespace near_cache {

class NearCacheTest : public ::testing::Test {
 protected:
  // Waits for the invalidations, reconnections and flushes the tests
  // expect: generous, since a sanitized build on a busy machine is slow; a
  // wait that runs out fails the test rather than hanging it.
  static constexpr absl::Duration kPatience = absl::Seconds(20);

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<lease::RedisServer>> server =
        lease::RedisServer::Start();
    if (absl::IsNotFound(server.status())) GTEST_SKIP() << server.status();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<lease::RedisLink>("127.0.0.1", server_->port(),
                                                 absl::Seconds(5));
  }

  NearCacheOptions Options() const {
    NearCacheOptions options;
    options.port = server_->port();
    return options;
  }

  std::unique_ptr<NearCache> Make(NearCacheOptions options,
                                  Mutants mutants = {}) {
    absl::StatusOr<std::unique_ptr<NearCache>> cache =
        NearCacheTesting::Create(std::move(options), std::move(mutants));
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? std::move(*cache) : nullptr;
  }
  std::unique_ptr<NearCache> Make() { return Make(Options()); }

  lease::Reply Call(std::initializer_list<absl::string_view> args) {
    absl::StatusOr<lease::Reply> reply = client_->Call(args);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? std::move(*reply) : nullptr;
  }

  // SET through the plain client, recorded in history_.
  void ClientSet(const std::string& key, const std::string& value) {
    const absl::Time start = absl::Now();
    lease::Reply reply = Call({"SET", key, value});
    ASSERT_NE(reply, nullptr);
    history_.Wrote(key, value, start, absl::Now());
  }

  // A's Get, recorded in history_.
  History::Value Read(NearCache& cache, const std::string& key) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::optional<std::string>> value = cache.Get(key);
    EXPECT_TRUE(value.ok()) << value.status();
    if (!value.ok()) return std::nullopt;
    history_.Read(key, *value, start, absl::Now());
    return *value;
  }

  static bool WaitUntil(const std::function<bool()>& done) {
    const absl::Time give_up = absl::Now() + kPatience;
    while (!done()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }

  std::unique_ptr<lease::RedisServer> server_;
  std::unique_ptr<lease::RedisLink> client_;
  History history_;
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_TESTS_NEAR_CACHE_FIXTURE_H_
