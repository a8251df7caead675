// Get with a key in another form than K (heterogeneous lookup, cache.h):
// std::string_view and string literals for std::string keys under the
// default Hash and Eq, and any type a transparent Hash and Eq take. Each
// must find exactly what Get(K) finds, so the hashes must agree.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace cache_lookup_test {

TEST(CacheLookup, StringViewFindsWhatTheStringFinds) {
  auto cache = Cache<std::string, int>::Create({});
  ASSERT_TRUE(cache.ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE((*cache)->Set(absl::StrCat("session-", i), i).ok());
  }
  for (int i = 0; i < 1000; ++i) {
    const std::string key = absl::StrCat("session-", i);
    const std::optional<int> v = (*cache)->Get(std::string_view(key));
    ASSERT_TRUE(v.has_value()) << key;
    EXPECT_EQ(*v, i);
  }
  EXPECT_EQ((*cache)->Get("session-7"), 7);  // a literal: no std::string
  EXPECT_EQ((*cache)->Get(std::string_view("session-1000")), std::nullopt);
  EXPECT_EQ((*cache)->Get(std::string_view("session-7\0", 10)), std::nullopt);
  EXPECT_TRUE((*cache)->Delete("session-7"));
  EXPECT_EQ((*cache)->Get("session-7"), std::nullopt);
  const CacheStats st = (*cache)->stats();
  EXPECT_EQ(st.hits, 1001u);
  EXPECT_EQ(st.misses, 3u);
}

// A node keeps a string key of up to 39 bytes in place and a longer one on
// the heap: each length round-trips through Set, Get (by string and by
// view), replacement and Delete, and the listener gets the key back whole.
TEST(CacheLookup, StringKeysOfEveryLengthRoundTrip) {
  std::vector<std::pair<std::string, RemovalCause>> removed;
  auto cache = Cache<std::string, int>::Create(
      {}, [&](std::string key, int, RemovalCause cause) {
        removed.emplace_back(std::move(key), cause);
      });
  ASSERT_TRUE(cache.ok());
  const std::vector<std::size_t> lengths = {0, 1, 15, 16, 38, 39, 40, 41, 200};
  std::vector<std::string> keys;
  for (std::size_t len : lengths) {
    std::string key(len, 'k');
    for (std::size_t i = 0; i < len; ++i)
      key[i] = static_cast<char>('a' + i % 26);
    keys.push_back(key);
    ASSERT_TRUE((*cache)->Set(key, static_cast<int>(len)).ok());
  }
  for (const std::string& key : keys) {
    EXPECT_EQ((*cache)->Get(key), static_cast<int>(key.size())) << key.size();
    EXPECT_EQ((*cache)->Get(std::string_view(key)),
              static_cast<int>(key.size()));
    // One byte shorter or longer is another key.
    EXPECT_EQ((*cache)->Get(key + "#"), std::nullopt) << key.size();
    if (!key.empty()) {
      EXPECT_EQ((*cache)->Get(std::string_view(key).substr(1)),
                key.size() == 1 ? std::optional<int>(0) : std::nullopt)
          << key.size();
    }
  }
  for (const std::string& key : keys) {
    ASSERT_TRUE((*cache)->Set(key, -1).ok());  // replaced
    EXPECT_TRUE((*cache)->Delete(key));
  }
  ASSERT_EQ(removed.size(), 2 * keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    EXPECT_EQ(removed[2 * k].first, keys[k]);
    EXPECT_EQ(removed[2 * k].second, RemovalCause::kReplaced);
    EXPECT_EQ(removed[2 * k + 1].first, keys[k]);
    EXPECT_EQ(removed[2 * k + 1].second, RemovalCause::kExplicit);
  }
  EXPECT_EQ((*cache)->size(), 0u);
}

// A Hash and Eq that take only views: the cache must hash and compare a
// lookup key with them as they are, building no std::string.
struct ViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const {
    return absl::Hash<std::string_view>{}(s);
  }
};
struct ViewEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const {
    return a == b;
  }
};

// A lookup key no std::string converts from implicitly.
struct Name {
  std::string_view text;
  operator std::string_view() const { return text; }
};

TEST(CacheLookup, TransparentHashAndEqTakeTheirOwnKeyType) {
  auto cache = Cache<std::string, int, ViewHash, ViewEq>::Create({});
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->Set("alice", 1).ok());
  ASSERT_TRUE((*cache)->Set("bob", 2).ok());
  EXPECT_EQ((*cache)->Get(std::string_view("alice")), 1);
  EXPECT_EQ((*cache)->Get(Name{"bob"}), 2);
  EXPECT_EQ((*cache)->Get(Name{"carol"}), std::nullopt);
  EXPECT_EQ((*cache)->Get(std::string("bob")), 2);
}

}  // namespace cache_lookup_test
}  // namespace timingwheel
