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

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/cache_flight.h"
#include "timingwheel/internal/cache_gate.h"
#include "timingwheel/internal/cache_pool.h"
#include "timingwheel/internal/cache_shard.h"
#include "timingwheel/options.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {

// Why a value left the cache.
enum class RemovalCause {
  kExpired,   // its time to live ran out
  kExplicit,  // Delete or Clear
  kReplaced,  // a Set of its key replaced the value
  kSize,      // evicted to stay within max_entries
};

// How a Cache behaves. Create validates it.
struct CacheOptions {
  absl::Duration ttl = absl::Minutes(1);  // time to live of Set without one;
                                          // > 0; InfiniteDuration = never
  bool sliding = false;         // a hit restarts the entry's time to live
                                // (expire after access); else after write
  std::size_t max_entries = 0;  // 0 = unbounded
  Options wheel;                // interval (= expiry precision), ticker,
                                // workers, ... as for TimingWheel
};

// A snapshot of a cache's counters since creation.
struct CacheStats {
  std::uint64_t hits = 0, misses = 0;
  std::uint64_t loads = 0, load_failures = 0;  // GetOrLoad's load() calls
  std::uint64_t expired = 0, evicted = 0;      // removals by kExpired, kSize
  std::size_t size = 0;                        // entries present
  // Extension: exceptions thrown by the removal listener (each caught; the
  // value still counts as gone, and the other removals are still told).
  std::uint64_t listener_exceptions = 0;
};

// A thread-safe keyed cache with time to live, a size bound and load-once.
// K: copyable, hashable by Hash, comparable by Eq. V: copyable (Get returns
// a copy: hold large values by std::shared_ptr).
//
// The entries live in up to 64 shards, each with its own std::mutex, table
// and eviction policy; a call locks one shard (Clear and stats() visit them
// all). Entries with a finite time to live are filed in per-shard buckets,
// one per wheel tick, and each bucket has one wheel timer: removing or
// replacing an entry costs no wheel command, and no timer is ever removed.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class Cache {
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
    if (options.ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("CacheOptions::ttl must be > 0");
    }
    // As the user wrote them: the wheel below is created with max_pending
    // and max_lag cleared, so a bad max_lag would otherwise pass unseen.
    if (absl::Status s = internal::ValidateOptions(options.wheel); !s.ok()) {
      return s;
    }
    std::unique_ptr<Cache> cache;
    try {
      cache = absl::WrapUnique(new Cache(options, std::move(on_removal)));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the cache");
    }
    Cache* self = cache.get();
    std::shared_ptr<internal::CacheGate> gate = cache->gate_;
    // The cache's wheel is never refused for room or for lag: a refused
    // re-file of a slid entry (in OnBucket) would have to expire it early
    // or lose its timer, and a refused bucket would fail a Set. Its
    // commands are one per new bucket, so the queue stays short without a
    // bound.
    Options wheel_options = options.wheel;
    wheel_options.max_pending = 0;
    wheel_options.max_lag = absl::ZeroDuration();
    auto wheel = Wheel::Create(
        wheel_options, [self, gate](BucketKey bucket, std::uint32_t shard) {
          if (!gate->Enter()) return;
          struct Leave {
            internal::CacheGate& gate;
            const Cache* const outer;
            ~Leave() {
              in_bucket_of_ = outer;
              gate.Leave();
            }
          } leave{*gate, std::exchange(in_bucket_of_, self)};
          self->OnBucket(bucket.first, shard);  // may destroy *self (~Cache)
        });
    if (!wheel.ok()) return wheel.status();
    cache->interval_ns_ = std::max<std::int64_t>(
        1, absl::ToInt64Nanoseconds(options.wheel.interval));
    cache->wheel_ = *std::move(wheel);
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
  ~Cache() {
    UserCallFrame::MarkDestroyed(this);
    // From a listener inside this thread's OnBucket, that call is ours and
    // returns untouched; any other must end before the memory goes.
    gate_->Close(in_bucket_of_ == this ? 1 : 0);
    // Refused inside the wheel's own callback; destroying it there returns
    // at once all the same (api.md E12).
    if (wheel_ != nullptr) wheel_->Stop().IgnoreError();
  }

  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The value of `key` if present and unexpired (a hit), else nullopt (a
  // miss). With sliding, a hit restarts the entry's time to live without a
  // wheel command. Cost: one shard lock, one clock read, one table probe,
  // an O(1) policy update when bounded, and a copy of the value.
  std::optional<V> Get(const K& key) {
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    std::lock_guard<std::mutex> lock(s.mu);
    const std::uint32_t i = HitLocked(s, key, h);
    if (i == internal::kCacheNil) return std::nullopt;
    return s.pool.at(i).value();
  }

  // Inserts, or replaces the value (the old one goes to the listener with
  // kReplaced) and restarts the time to live with `ttl` (> 0;
  // InfiniteDuration = never expires, and no timer is set). Inserting into
  // a full cache evicts another entry (kSize). Errors: InvalidArgument for
  // ttl <= 0; the wheel's error if it refuses the timer (nothing changes
  // then). Cost: one shard lock and probe, O(1) list updates, a wheel
  // command only for the first entry of a tick's bucket (per shard), an
  // eviction when full.
  absl::Status Set(K key, V value) {
    return Set(std::move(key), std::move(value), options_.ttl);
  }
  absl::Status Set(K key, V value, absl::Duration ttl) {
    if (ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("ttl must be > 0");
    }
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    Removals removals;
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      SupersedeLoadLocked(s, key);
      status = SetLocked(s, std::move(key), std::move(value), ttl, h, removals);
    }
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return status;
  }
  template <typename Rep, typename Period>
  absl::Status Set(K key, V value, std::chrono::duration<Rep, Period> ttl) {
    return Set(std::move(key), std::move(value), internal::ToDuration(ttl));
  }

  // Removes `key`; true if it was present and unexpired (listener:
  // kExplicit; an expired entry not yet removed by the wheel goes with
  // kExpired and counts as absent). Cost: one shard lock and probe, O(1)
  // list updates; no wheel command.
  bool Delete(const K& key) {
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    Removals removals;
    bool present = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      SupersedeLoadLocked(s, key);
      const std::uint32_t i = FindLocked(s, key, h);
      if (i != internal::kCacheNil) {
        present = NowNs() < s.pool.at(i).deadline;
        RemoveLocked(s, i, h.tag,
                     present ? RemovalCause::kExplicit : RemovalCause::kExpired,
                     removals);
      }
    }
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return present;
  }

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
    if (!load) return absl::InvalidArgumentError("load is empty");
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    std::shared_ptr<internal::CacheFlight<V>> flight;
    bool leader = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      const std::uint32_t i = HitLocked(s, key, h);
      if (i != internal::kCacheNil) return s.pool.at(i).value();
      auto [it, inserted] = s.flights.try_emplace(key);
      if (inserted) {
        it->second = std::make_shared<internal::CacheFlight<V>>();
        it->second->leader = std::this_thread::get_id();
        leader = true;
      } else if (it->second->leader == std::this_thread::get_id()) {
        // Called from this key's own load(), directly or through other
        // keys' loads: waiting would wait for itself (Guava and Caffeine
        // throw IllegalStateException here).
        return absl::FailedPreconditionError(
            "GetOrLoad: the load() of this key asked for the same key");
      }
      flight = it->second;
    }
    if (!leader) return flight->Wait();

    absl::StatusOr<V> result;
    bool destroyed;
    {
      UserCallFrame frame(this);
      try {
        result = load();
      } catch (...) {
        result = absl::InternalError("load threw an exception");
      }
      destroyed = frame.destroyed();
    }
    if (destroyed) {
      // load() destroyed the cache: nothing to store it in. The callers
      // waiting for it get the result all the same.
      flight->Finish(result);
      return result;
    }
    if (result.ok()) {
      loads_.fetch_add(1, std::memory_order_relaxed);
    } else {
      load_failures_.fetch_add(1, std::memory_order_relaxed);
    }
    Removals removals;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      // Under the same lock as storing: a caller arriving now finds the
      // value, or (after an error) starts a new load.
      s.flights.erase(key);
      if (result.ok() && flight->superseded) {
        // As if stored and at once replaced by the later write (Guava
        // reports its discarded load likewise): every value a load
        // returns leaves through the listener exactly once.
        if (listener_)
          removals.emplace_back(key, *result, RemovalCause::kReplaced);
      } else if (result.ok()) {
        absl::Status st = SetLocked(s, key, *result, options_.ttl, h, removals);
        if (!st.ok()) result = st;
      }
    }
    flight->Finish(result);
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return result;
  }

  // Removes every entry (listener: kExplicit, or kExpired for an entry
  // expired but not yet removed by the wheel), one shard at a time. Cost:
  // O(entries); no wheel command.
  void Clear() {
    for (auto& sp : shards_) {
      Shard& s = *sp;
      Removals removals;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        const std::int64_t now = NowNs();
        s.index.ForEach([&](std::uint32_t i) {
          auto& n = s.pool.at(i);
          Unfile(s, i);
          const RemovalCause cause = now >= n.deadline
                                         ? RemovalCause::kExpired
                                         : RemovalCause::kExplicit;
          if (cause == RemovalCause::kExpired) {
            s.expired.fetch_add(1, std::memory_order_relaxed);
          }
          Collect(s, i, cause, removals);
        });
        s.index.Clear();
        for (auto& [key, flight] : s.flights) flight->superseded = true;
        if (s.capacity != 0) s.policy.Clear();
        s.last_hit = internal::kCacheNil;
        s.size.store(0, std::memory_order_relaxed);
        MaybeRelease(s);
      }
      if (Notify(removals)) return;  // destroyed from the listener
    }
  }

  // Entries present (expired ones not yet removed by the wheel included).
  // Cost: one relaxed load per shard.
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size.load(std::memory_order_relaxed);
    return n;
  }

  // The counters since creation (loads: load() calls that returned OK;
  // load_failures: the others). Cost: a few relaxed loads per shard.
  CacheStats stats() const {
    CacheStats st;
    for (const auto& s : shards_) {
      st.hits += s->hits.load(std::memory_order_relaxed);
      st.misses += s->misses.load(std::memory_order_relaxed);
      st.expired += s->expired.load(std::memory_order_relaxed);
      st.evicted += s->evicted.load(std::memory_order_relaxed);
      st.size += s->size.load(std::memory_order_relaxed);
    }
    st.loads = loads_.load(std::memory_order_relaxed);
    st.load_failures = load_failures_.load(std::memory_order_relaxed);
    st.listener_exceptions =
        listener_exceptions_.load(std::memory_order_relaxed);
    return st;
  }

 private:
  // Wheel key: an expiry bucket (tick, shard); wheel value: the shard.
  using BucketKey = std::pair<std::int64_t, std::uint32_t>;
  using Wheel = TimingWheel<BucketKey, std::uint32_t>;
  using Node = internal::CacheNode<K, V>;
  using Shard = internal::CacheShard<K, V, Hash, Eq>;
  using Removals = std::vector<std::tuple<K, V, RemovalCause>>;

  // A key's hash, split: which shard, and the 32 bits its index keeps.
  struct Hashed {
    std::uint64_t mixed;  // for the frequency sketch
    std::size_t shard;
    std::uint32_t tag;
  };

  static constexpr std::int64_t kNever =
      std::numeric_limits<std::int64_t>::max();
  static constexpr int kMaxShardBits = 6;
  // A bounded cache keeps at least this many entries per shard, so that each
  // shard's policy has room to choose.
  static constexpr std::size_t kMinShardCapacity = 128;

  Cache(const CacheOptions& options, RemovalListener on_removal)
      : options_(options),
        listener_(on_removal ? std::make_shared<const RemovalListener>(
                                   std::move(on_removal))
                             : nullptr) {
    int bits = kMaxShardBits;
    if (options.max_entries != 0) {
      bits = 0;
      while (bits < kMaxShardBits &&
             (options.max_entries >> (bits + 1)) >= kMinShardCapacity) {
        ++bits;
      }
    }
    shard_bits_ = bits;
    const std::size_t n = std::size_t{1} << bits;
    shards_.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      auto s = std::make_unique<Shard>(hash_, eq_);
      s->id = static_cast<std::uint32_t>(k);
      if (options.max_entries != 0) {
        // Shares that sum to max_entries, so the total never exceeds it.
        s->capacity = options.max_entries / n + (k < options.max_entries % n);
        s->policy.Reset(s->capacity);
      }
      shards_.push_back(std::move(s));
    }
  }

  Hashed HashOf(const K& key) const {
    // splitmix64's finalizer: good bits everywhere even for an identity
    // Hash. The shard takes the top bits, the index the low ones.
    std::uint64_t x = static_cast<std::uint64_t>(hash_(key));
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return Hashed{x, shard_bits_ == 0 ? 0 : x >> (64 - shard_bits_),
                  static_cast<std::uint32_t>(x)};
  }

  std::int64_t NowNs() const { return absl::ToInt64Nanoseconds(wheel_->Now()); }

  // A time to live in ns; Node::kTtlNever for never (and for anything
  // longer than about 146 years).
  static std::int64_t ToNs(absl::Duration d) {
    if (d == absl::InfiniteDuration()) return Node::kTtlNever;
    const std::int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates
    return std::clamp<std::int64_t>(ns, 1, Node::kTtlNever);
  }
  // now + ttl; kNever for never, and for deadlines beyond about 73 years
  // (so tick arithmetic cannot overflow).
  static std::int64_t Deadline(std::int64_t now, std::int64_t ttl) {
    if (ttl == Node::kTtlNever || ttl >= kNever / 4 - now) return kNever;
    return now + ttl;
  }

  // A Set, Delete or Clear of `key` is under way: a load of it in flight
  // must not store its (older) value afterwards. A compare when no load is
  // in flight in the shard.
  static void SupersedeLoadLocked(Shard& s, const K& key) {
    if (s.flights.empty()) return;
    auto it = s.flights.find(key);
    if (it != s.flights.end()) it->second->superseded = true;
  }

  std::uint32_t FindLocked(Shard& s, const K& key, const Hashed& h) {
    return s.index.Find(
        h.tag, [&](std::uint32_t i) { return eq_(s.pool.at(i).key(), key); });
  }

  // Looks `key` up; on a hit counts it, slides it, updates the policy and
  // returns the node; on a miss (absent or expired) counts it and returns
  // kCacheNil. The clock is read under the lock, so an entry cannot expire
  // between the check and the caller's copy.
  std::uint32_t HitLocked(Shard& s, const K& key, const Hashed& h) {
    const std::uint32_t i = FindLocked(s, key, h);
    const std::int64_t now = NowNs();
    if (i == internal::kCacheNil || now >= s.pool.at(i).deadline) {
      s.misses.fetch_add(1, std::memory_order_relaxed);
      return internal::kCacheNil;
    }
    auto& n = s.pool.at(i);
    // Sliding costs no wheel command and no relink: when the entry's bucket
    // fires, it sees the later deadline and moves the entry on.
    if (options_.sliding && n.deadline != kNever) {
      n.deadline = Deadline(now, n.ttl());
    }
    if (s.capacity != 0) s.policy.OnAccess(s.pool, i, h.mixed);
    s.last_hit = i;
    s.hits.fetch_add(1, std::memory_order_relaxed);
    return i;
  }

  absl::Status SetLocked(Shard& s, K key, V value, absl::Duration ttl,
                         const Hashed& h, Removals& removals) {
    const std::int64_t now = NowNs();
    const std::int64_t ttl_ns = ToNs(ttl);
    const std::int64_t deadline = Deadline(now, ttl_ns);
    // The bucket first: its timer is the only wheel command, and if the
    // wheel refuses it nothing has changed yet.
    std::uint32_t bucket = internal::kCacheNil;
    if (deadline != kNever) {
      absl::StatusOr<std::uint32_t> b = BucketFor(s, TickOf(deadline), now);
      if (!b.ok()) return b.status();
      bucket = *b;
    }
    std::uint32_t i = FindLocked(s, key, h);
    if (i != internal::kCacheNil) {
      // Replaced in place: the node leaves its bucket for the new one.
      auto& n = s.pool.at(i);
      Unfile(s, i);
      const RemovalCause cause =
          now >= n.deadline ? RemovalCause::kExpired : RemovalCause::kReplaced;
      if (cause == RemovalCause::kExpired) {
        s.expired.fetch_add(1, std::memory_order_relaxed);
      }
      if (listener_) {
        removals.emplace_back(std::move(key), std::move(n.value()), cause);
      }
      n.value() = std::move(value);
      if (s.capacity != 0) s.policy.OnAccess(s.pool, i, h.mixed);
    } else {
      i = s.pool.Allocate(std::move(key), std::move(value));
      s.index.Insert(h.tag, i);
      s.size.store(s.index.size(), std::memory_order_relaxed);
      if (s.capacity != 0) s.policy.OnInsert(s.pool, i, h.mixed);
    }
    auto& n = s.pool.at(i);
    n.set_ttl(ttl_ns);
    n.deadline = deadline;
    if (bucket != internal::kCacheNil) File(s, i, bucket);
    if (s.capacity != 0) {
      while (s.index.size() > s.capacity) {
        const std::uint32_t v =
            s.policy.Victim(s.pool, i, s.last_hit, [this, &s](std::uint32_t j) {
              return HashOf(s.pool.at(j).key()).mixed;
            });
        if (v == internal::kCacheNil) break;
        const RemovalCause cause = now >= s.pool.at(v).deadline
                                       ? RemovalCause::kExpired
                                       : RemovalCause::kSize;
        RemoveLocked(s, v, HashOf(s.pool.at(v).key()).tag, cause, removals);
      }
    }
    return absl::OkStatus();
  }

  // The tick whose bucket holds deadline d: the first tick at or after it.
  std::int64_t TickOf(std::int64_t d) const {
    return d / interval_ns_ + (d % interval_ns_ != 0);
  }

  // The sentinel of shard s's bucket for `tick`, created with its wheel
  // timer (due at tick * interval) if absent. Errors: the wheel's.
  absl::StatusOr<std::uint32_t> BucketFor(Shard& s, std::int64_t tick,
                                          std::int64_t now) {
    auto it = s.buckets.find(tick);
    if (it != s.buckets.end()) return it->second;
    // The wheel fires a timer on the first tick at or after its deadline,
    // which it computes from its own clock a moment after `now`: aimed half
    // an interval early, the timer still fires on tick `tick` (ticks are
    // multiples of the interval), never on the one after nor before.
    const std::int64_t due = tick * interval_ns_;
    absl::Status st = wheel_->SetTimer(BucketKey{tick, s.id}, s.id,
                                       absl::Nanoseconds(std::max<std::int64_t>(
                                           due - now - interval_ns_ / 2, 1)));
    if (!st.ok()) return st;
    const std::uint32_t sentinel = s.pool.AllocateSentinel();
    s.buckets.emplace(tick, sentinel);
    return sentinel;
  }

  // Links entry i into the bucket whose sentinel is `bucket`.
  void File(Shard& s, std::uint32_t i, std::uint32_t bucket) {
    auto& n = s.pool.at(i);
    auto& head = s.pool.at(bucket);
    n.eprev = bucket;
    n.enext = head.enext;
    s.pool.at(head.enext).eprev = i;
    head.enext = i;
  }

  // Unlinks entry i from its bucket, if it is in one. O(1): the lists are
  // circular through their sentinel, so the bucket need not be known.
  void Unfile(Shard& s, std::uint32_t i) {
    auto& n = s.pool.at(i);
    if (n.enext == internal::kCacheNil) return;
    s.pool.at(n.eprev).enext = n.enext;
    s.pool.at(n.enext).eprev = n.eprev;
    n.eprev = n.enext = internal::kCacheNil;
  }

  // An empty shard with no bucket left gives its node chunks back (one kept,
  // so a shard going 0 <-> 1 entries does not churn).
  void MaybeRelease(Shard& s) {
    if (s.index.size() == 0 && s.buckets.empty() &&
        s.pool.extent() > Shard::Pool::kChunk) {
      s.pool.DestroyAll();
    }
  }

  // Takes entry i (index hash bits `tag`) out of shard s: index, policy,
  // bucket, counters; its key and value go to `removals` when there is a
  // listener.
  void RemoveLocked(Shard& s, std::uint32_t i, std::uint32_t tag,
                    RemovalCause cause, Removals& removals) {
    Unfile(s, i);
    s.index.Erase(tag, i);
    if (s.capacity != 0) s.policy.OnRemove(s.pool, i);
    if (cause == RemovalCause::kExpired) {
      s.expired.fetch_add(1, std::memory_order_relaxed);
    } else if (cause == RemovalCause::kSize) {
      s.evicted.fetch_add(1, std::memory_order_relaxed);
    }
    Collect(s, i, cause, removals);
    s.size.store(s.index.size(), std::memory_order_relaxed);
    MaybeRelease(s);
  }

  // Moves node i's key and value to `removals` (if there is a listener) and
  // frees the node. The index must no longer be searched for i.
  void Collect(Shard& s, std::uint32_t i, RemovalCause cause,
               Removals& removals) {
    auto& n = s.pool.at(i);
    if (listener_) {
      removals.emplace_back(std::move(n.key()), std::move(n.value()), cause);
    }
    if (s.last_hit == i) s.last_hit = internal::kCacheNil;
    s.pool.Free(i);
  }

  // The wheel's callback: bucket `tick` of shard `shard` is due. Its
  // entries past their deadline are removed (kExpired); the others were slid
  // and move to the bucket of their new deadline. Done in batches, with the
  // listener called between them, so the lock is never held for long.
  void OnBucket(std::int64_t tick, std::uint32_t shard) {
    constexpr int kBatch = 256;
    Shard& s = *shards_[shard];
    for (bool done = false; !done;) {
      Removals removals;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.buckets.find(tick);
        if (it == s.buckets.end()) return;
        const std::uint32_t sentinel = it->second;
        const std::int64_t now = NowNs();
        for (int k = 0; k < kBatch; ++k) {
          const std::uint32_t i = s.pool.at(sentinel).enext;
          if (i == sentinel) {
            s.buckets.erase(it);
            s.pool.Free(sentinel);
            MaybeRelease(s);
            done = true;
            break;
          }
          auto& n = s.pool.at(i);
          if (now >= n.deadline) {
            RemoveLocked(s, i, HashOf(n.key()).tag, RemovalCause::kExpired,
                         removals);
            continue;
          }
          Unfile(s, i);
          if (n.deadline == kNever) continue;  // slid beyond ~73 years
          // Never back into this bucket, whatever the clocks say.
          auto b = BucketFor(s, std::max(TickOf(n.deadline), tick + 1), now);
          // Refused only once the wheel is stopping, i.e. the cache is being
          // destroyed: the entry then stays unfiled and is destroyed with the
          // cache, without a listener call (C7), never expired early.
          if (b.ok()) File(s, i, *b);
        }
      }
      if (Notify(removals)) return;  // destroyed from the listener
    }
  }

  // Tells the listener of each removal, outside every lock. Returns true
  // if the cache was destroyed from inside one of those calls: the rest are
  // not told (their values die with `removals`, as ~Cache destroys the
  // values still present), and the caller must not touch the cache again.
  bool Notify(Removals& removals) {
    if (removals.empty()) return false;
    // Our own reference: destroying the cache from the listener must not
    // destroy the callable that is running.
    const std::shared_ptr<const RemovalListener> listener = listener_;
    UserCallFrame frame(this);
    for (auto& [k, v, cause] : removals) {
      // One listener's exception must not cost the next removal its call,
      // nor escape from a Set or Delete that has already done its work.
      try {
        (*listener)(std::move(k), std::move(v), cause);
      } catch (...) {
        if (!frame.destroyed()) {
          listener_exceptions_.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (frame.destroyed()) break;
    }
    return frame.destroyed();
  }

  // A call into the user's code (the listener, or a load) in progress on
  // this thread, innermost first: that code may call another cache, or this
  // one. ~Cache marks the frames of the cache it destroys, and the Notify or
  // GetOrLoad that owns one touches the cache no more.
  class UserCallFrame {
   public:
    explicit UserCallFrame(const Cache* cache)
        : cache_(cache), outer_(std::exchange(user_call_frames_, this)) {}
    ~UserCallFrame() { user_call_frames_ = outer_; }
    UserCallFrame(const UserCallFrame&) = delete;
    UserCallFrame& operator=(const UserCallFrame&) = delete;

    // True once ~Cache of this frame's cache has run.
    bool destroyed() const { return destroyed_; }
    // ~Cache of `cache`: marks this thread's frames of it.
    static void MarkDestroyed(const Cache* cache) {
      for (UserCallFrame* f = user_call_frames_; f != nullptr; f = f->outer_) {
        if (f->cache_ == cache) f->destroyed_ = true;
      }
    }

   private:
    const Cache* const cache_;
    UserCallFrame* const outer_;
    bool destroyed_ = false;
  };
  static inline thread_local UserCallFrame* user_call_frames_ = nullptr;

  // The cache whose OnBucket this thread (a wheel worker) is running.
  static inline thread_local const Cache* in_bucket_of_ = nullptr;

  const CacheOptions options_;
  // Null without a listener. Shared with each Notify (see there).
  const std::shared_ptr<const RemovalListener> listener_;
  Hash hash_;
  Eq eq_;
  int shard_bits_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::int64_t interval_ns_ = 1;  // the wheel's interval: a bucket's width
  std::atomic<std::uint64_t> loads_{0}, load_failures_{0};
  std::atomic<std::uint64_t> listener_exceptions_{0};
  const std::shared_ptr<internal::CacheGate> gate_ =
      std::make_shared<internal::CacheGate>();
  std::unique_ptr<Wheel> wheel_;  // last: stopped first, by ~Cache
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_CACHE_H_
