// timingwheel::Cache: a keyed expiring cache built on TimingWheel.
//
// Entries expire by time to live (after write, or after access with
// `sliding`), are removed by the wheel within about one interval of expiry
// whether or not anyone calls the cache, and are evicted by a W-TinyLFU
// policy once `max_entries` is reached. A removal listener hears of every
// value that leaves, exactly once, outside every lock. See docs/cache.md for
// the design and its costs.
//
//   using UserCache = timingwheel::Cache<std::string, std::shared_ptr<User>>;
//   auto cache = UserCache::Create({.ttl = absl::Minutes(5),
//                                   .max_entries = 100000,
//                                   .wheel = {.interval = absl::Seconds(1)}});
//   (*cache)->Set("alice", user).IgnoreError();
//   std::optional<std::shared_ptr<User>> u = (*cache)->Get("alice");
//   absl::StatusOr<std::shared_ptr<User>> v =
//       (*cache)->GetOrLoad("bob", [] { return LoadUser("bob"); });
#ifndef TIMINGWHEEL_CACHE_H_
#define TIMINGWHEEL_CACHE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/duration.h"
#include "timingwheel/internal/cache/cache_impl.h"
#include "timingwheel/options.h"  // CacheOptions, RemovalCause
#include "timingwheel/stats.h"    // CacheStats
#include "timingwheel/timing_wheel.h"

namespace timingwheel {

// A thread-safe keyed cache with time to live, a size bound and load-once.
// K: copyable, hashable by Hash, comparable by Eq. V: copyable (Get returns
// a copy: hold large values by std::shared_ptr).
//
// The entries live in up to 64 shards, each with its own std::mutex, table
// and eviction policy; a write locks one shard (Clear and stats() visit
// them all), and Get locks none (see Get). Entries with a finite time to
// live are filed in per-shard buckets,
// one per wheel tick, and each bucket has one wheel timer: removing or
// replacing an entry costs no wheel command, and no timer is ever removed.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class Cache : private internal::CacheImpl<K, V, Hash, Eq> {
  using Impl = internal::CacheImpl<K, V, Hash, Eq>;

 public:
  // Called with every value that leaves the cache by one of the four causes,
  // exactly once, never under a cache lock (so it may call the cache): on a
  // wheel worker for kExpired, else on the thread whose call removed it.
  using RemovalListener =
      std::function<void(K key, V value, RemovalCause cause)>;
  // GetOrLoad's source of a missing value.
  using Loader = std::function<absl::StatusOr<V>()>;

  // Validates options and starts the cache's wheel. Errors: InvalidArgument
  // for ttl <= 0, and whatever TimingWheel::Create returns for
  // options.wheel. Cost: the wheel's threads and slots, up to 64 shards of
  // a few hundred bytes each and, when bounded, frequency sketches of 8 to
  // 16 bytes per max_entries.
  static absl::StatusOr<std::unique_ptr<Cache>> Create(
      CacheOptions options, RemovalListener on_removal = nullptr) {
    if (absl::Status s = Impl::Validate(options); !s.ok()) return s;
    std::unique_ptr<Cache> cache;
    try {
      cache = absl::WrapUnique(new Cache(options, std::move(on_removal)));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the cache");
    }
    if (absl::Status s = cache->StartWheel(); !s.ok()) return s;
    return cache;
  }

  // Stops the wheel (waiting for the wheel's listener calls in flight on
  // other threads), then destroys the values still present without calling
  // the listener. After it returns no listener call starts. It may be
  // called from this cache's own listener: the call that removed the value
  // then returns without touching the cache again, and the removals it had
  // not yet told are destroyed untold, like the values still present. So
  // may a GetOrLoad's load(): GetOrLoad then returns what it loaded, stored
  // nowhere.
  ~Cache() = default;

  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The value of `key` if present and unexpired (a hit), else nullopt (a
  // miss). With sliding, a hit restarts the entry's time to live without a
  // wheel command. Cost: no lock and no write to memory other threads
  // write (but the deadline, on a sliding hit): one clock read, one table
  // probe, a copy of the value, and when bounded a record of the hit for
  // the eviction policy. A value removed while another thread's Get copies
  // it is destroyed once that Get is done (docs/cache_concurrency.md).
  std::optional<V> Get(const K& key) { return Impl::Get(key); }

  // Get, for a key in a form that Hash and Eq take without building a K
  // (heterogeneous lookup, as absl's containers do): a std::string_view, a
  // const char* or a string literal when K is std::string with the default
  // Hash and Eq; any type that a transparent Hash and Eq (both declaring
  // is_transparent) take, which must hash it as they hash the equal K. The
  // same result and cost as Get(K(key)), less constructing the K.
  template <typename Q,
            typename = std::enable_if_t<Impl::template kLookupKey<Q>>>
  std::optional<V> Get(const Q& key) {
    return Impl::Get(key);
  }

  // Inserts, or replaces the value (the old one goes to the listener with
  // kReplaced) and restarts the time to live with `ttl` (> 0;
  // InfiniteDuration = never expires, and no timer is set). Inserting into
  // a full cache evicts another entry (kSize). Errors: InvalidArgument for
  // ttl <= 0; the wheel's error if it refuses a new bucket's timer
  // (nothing changes then). Cost: one shard lock and probe, O(1) list
  // updates, a wheel command only for the first entry of a tick's bucket
  // (per shard), an eviction when full. A one-word value replacing one
  // whose deadline was earlier is stored in place: no list update, no
  // timer, and in a cache without max_entries no lock either, one
  // compare-and-swap on the entry (docs/cache_concurrency.md).
  absl::Status Set(K key, V value) {
    return Impl::Set(std::move(key), std::move(value));
  }
  absl::Status Set(K key, V value, absl::Duration ttl) {
    return Impl::Set(std::move(key), std::move(value), ttl);
  }
  template <typename Rep, typename Period>
  absl::Status Set(K key, V value, std::chrono::duration<Rep, Period> ttl) {
    return Impl::Set(std::move(key), std::move(value),
                     internal::ToDuration(ttl));
  }

  // Removes `key`; true if it was present and unexpired (listener:
  // kExplicit; an expired entry not yet removed by the wheel goes with
  // kExpired and counts as absent). Cost: one shard lock and probe, O(1)
  // list updates; no wheel command.
  bool Delete(const K& key) { return Impl::Delete(key); }

  // Get, and on a miss calls load() once for all the threads missing `key`
  // at the same time; each gets its result. An OK result is stored with
  // options.ttl, unless a Set, Delete or Clear of the key came while load
  // ran: the later write wins (the loaded value may be older than it), and
  // the loaded value goes to the listener as kReplaced; an error is
  // returned to every waiter and not stored; an exception from load
  // becomes Internal for every waiter. No lock is held while load runs, so
  // it may call the cache; a GetOrLoad of its own key from it (or from a
  // load it leads to, on the same thread) returns FailedPrecondition rather
  // than wait for itself. A load() that destroys the cache gets its result
  // returned, stored nowhere. InvalidArgument for an empty load. Cost: a hit
  // costs as Get; a miss adds a flight record (one allocation) and a Set.
  absl::StatusOr<V> GetOrLoad(const K& key, const Loader& load) {
    return Impl::GetOrLoad(key, load);
  }

  // Removes every entry (listener: kExplicit, or kExpired for an entry
  // expired but not yet removed by the wheel), one shard at a time. Cost:
  // O(entries); no wheel command.
  void Clear() { Impl::Clear(); }

  // Entries present (expired ones not yet removed by the wheel included).
  // Cost: one relaxed load per shard.
  std::size_t size() const { return Impl::size(); }

  // The counters since creation (loads: load() calls that returned OK;
  // load_failures: the others). Cost: a few relaxed loads per shard.
  CacheStats stats() const { return Impl::stats(); }

 private:
  friend class internal::CacheTestPeer;

  Cache(const CacheOptions& options, RemovalListener on_removal)
      : Impl(options, std::move(on_removal)) {}
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_CACHE_H_
