// InlineString and KeyStore: a string key is held in place up to
// kCapacity characters and on the heap past it, survives every copy, move
// and assignment with the same characters, owns its heap block exactly
// once (ASan sees a double free or a leak), and compares as its
// characters; any other key, or a string with a user's Eq, is held as is.
#include "timingwheel/internal/base/stored_key.h"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "timingwheel/internal/base/inline_string.h"

namespace timingwheel {
namespace internal {
namespace {

constexpr std::size_t kCap = InlineString::kCapacity;

// Keys either side of the inline capacity, the empty one, and one with NULs.
std::vector<std::string> Keys() {
  return {"",
          "k",
          std::string(kCap - 1, 'a'),
          std::string(kCap, 'b'),
          std::string(kCap + 1, 'c'),
          std::string(300, 'd'),
          std::string("a\0b", 3)};
}

TEST(InlineString, HoldsTheCharactersOfEveryLength) {
  for (const std::string& k : Keys()) {
    InlineString s(k);
    EXPECT_EQ(s.view(), k);
    EXPECT_EQ(s.ToString(), k);
  }
}

TEST(InlineString, TakingAStringLeavesItEmpty) {
  for (const std::string& k : Keys()) {
    std::string source = k;
    InlineString s(std::move(source));
    EXPECT_EQ(s.view(), k);
    EXPECT_TRUE(source.empty());  // NOLINT: moved-from is empty
    const std::string kept = k;
    InlineString copy(kept);  // from a const string: a copy
    EXPECT_EQ(kept, k);
  }
}

TEST(InlineString, CopiesAndMovesKeepTheCharacters) {
  for (const std::string& k : Keys()) {
    InlineString a(k);
    InlineString copy(a);
    EXPECT_EQ(copy.view(), k);
    EXPECT_EQ(a.view(), k);  // a copy leaves its source alone
    InlineString moved(std::move(copy));
    EXPECT_EQ(moved.view(), k);
    EXPECT_TRUE(copy.view().empty());  // NOLINT: moved-from is empty
    for (const std::string& other : Keys()) {
      InlineString target(other);
      target = a;  // copy-assign over inline and heap targets
      EXPECT_EQ(target.view(), k);
      InlineString target2(other);
      InlineString source(k);
      target2 = std::move(source);
      EXPECT_EQ(target2.view(), k);
    }
    InlineString self(k);
    InlineString& alias = self;
    self = alias;
    self = std::move(alias);
    EXPECT_EQ(self.view(), k);
  }
}

TEST(InlineString, EqualityIsTheCharacters) {
  const std::vector<std::string> keys = Keys();
  for (const std::string& a : keys) {
    for (const std::string& b : keys) {
      EXPECT_EQ(InlineString(a) == InlineString(b), a == b) << a << " " << b;
    }
  }
  // Same length, last character different, both inline and both on heap.
  EXPECT_FALSE(InlineString(std::string(kCap, 'x')) ==
               InlineString(std::string(kCap - 1, 'x') + "y"));
  EXPECT_FALSE(InlineString(std::string(kCap + 5, 'x')) ==
               InlineString(std::string(kCap + 4, 'x') + "y"));
}

TEST(KeyStore, PlainStringKeysAreHeldInline) {
  using Plain = KeyStore<std::string, std::equal_to<std::string>>;
  using Transparent = KeyStore<std::string, std::equal_to<>>;
  static_assert(std::is_same_v<Plain::Stored, InlineString>);
  static_assert(std::is_same_v<Transparent::Stored, InlineString>);
  for (const std::string& k : Keys()) {
    InlineString stored(k);
    EXPECT_TRUE(Plain::Equal({}, stored, k));
    EXPECT_TRUE(Plain::Equal({}, k, stored));
    EXPECT_FALSE(Plain::Equal({}, stored, k + "!"));
    EXPECT_EQ(Plain::Take(stored), k);
    EXPECT_EQ(Plain::AsKey(stored), k);
  }
}

// A user's Eq sees std::strings, so such keys are held as std::strings.
struct CaseInsensitiveEq {
  bool operator()(const std::string& a, const std::string& b) const {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i]))) {
        return false;
      }
    }
    return true;
  }
};

TEST(KeyStore, OtherKeysAreHeldAsTheyAre) {
  using User = KeyStore<std::string, CaseInsensitiveEq>;
  using Integer = KeyStore<int, std::equal_to<int>>;
  static_assert(std::is_same_v<User::Stored, std::string>);
  static_assert(std::is_same_v<Integer::Stored, int>);
  EXPECT_TRUE(User::Equal({}, std::string("AbC"), std::string("aBc")));
  std::string key = "session";
  EXPECT_EQ(User::Take(key), "session");
  int i = 7;
  EXPECT_EQ(Integer::Take(i), 7);
  EXPECT_FALSE(Integer::Equal({}, 7, 8));
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
