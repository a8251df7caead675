// How a wheel's commands and entries hold a key of type K.
#ifndef TIMINGWHEEL_INTERNAL_BASE_STORED_KEY_H_
#define TIMINGWHEEL_INTERNAL_BASE_STORED_KEY_H_

#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "timingwheel/internal/base/inline_string.h"

namespace timingwheel {
namespace internal {

// A std::string compared by plain equality is held as an InlineString
// (see there for why); its equality is then the characters', so the loop
// compares string_views and never needs a std::string. A string key with a
// user's Eq is held as it is: that Eq takes std::strings.
template <typename K, typename Eq>
inline constexpr bool kHoldsInline =
    std::is_same_v<K, std::string> &&
    (std::is_same_v<Eq, std::equal_to<std::string>> ||
     std::is_same_v<Eq, std::equal_to<>>);

// KeyStore<K, Eq>::Stored is what holds a key, constructed from a K&&.
// View gives what Eq compares, of a stored key or a K; Equal compares any
// two of them; Take hands a stored key out as a K (on the thread that will
// own it); AsKey gives a K to hash (a copy when the key is held inline).
template <typename K, typename Eq, bool kInline = kHoldsInline<K, Eq>>
struct KeyStore {
  using Stored = K;

  static const K& View(const K& key) { return key; }
  template <typename A, typename B>
  static bool Equal(const Eq& eq, const A& a, const B& b) {
    return eq(View(a), View(b));
  }
  static K Take(Stored& stored) { return std::move(stored); }
  static const K& AsKey(const Stored& stored) { return stored; }
};

template <typename K, typename Eq>
struct KeyStore<K, Eq, true> {
  using Stored = InlineString;

  static std::string_view View(const InlineString& key) { return key.view(); }
  static std::string_view View(const std::string& key) { return key; }
  template <typename A, typename B>
  static bool Equal(const Eq&, const A& a, const B& b) {
    return View(a) == View(b);
  }
  static std::string Take(Stored& stored) { return stored.ToString(); }
  static std::string AsKey(const Stored& stored) { return stored.ToString(); }
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_STORED_KEY_H_
