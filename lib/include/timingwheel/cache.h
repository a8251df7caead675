// timingwheel::Cache: a keyed expiring cache built on TimingWheel.
//
// Entries expire by time to live (after write, or after access with
// `sliding`), are removed by the wheel within about one interval of expiry
// whether or not anyone calls the cache, and are evicted by a W-TinyLFU
// policy once `max_entries` is reached. A removal listener hears of every
// value that leaves, exactly once, outside every lock. See docs/cache.md for
// the design and its costs.
//
//   auto cache = timingwheel::Cache<std::string,
//   std::shared_ptr<User>>::Create(
//       {.ttl = absl::Minutes(5), .max_entries = 100000,
//        .wheel = {.interval = absl::Milliseconds(100)}});
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
#include <tuple>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/cache_flight.h"
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
};

// A thread-safe keyed cache with time to live, a size bound and load-once.
// K: copyable, hashable by Hash, comparable by Eq. V: copyable (Get returns
// a copy: hold large values by std::shared_ptr).
//
// The entries live in up to 64 shards, each with its own std::mutex, table
// and eviction policy; a call locks one shard (Clear and stats() visit them
// all). Each stored value with a finite time to live has one wheel timer,
// named by a generation number unique to that value, so timers of replaced
// or deleted values can never touch a newer value.
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
  // options.wheel. Cost: the wheel's threads and slots, and 64 shards of a
  // few hundred bytes each.
  static absl::StatusOr<std::unique_ptr<Cache>> Create(
      CacheOptions options, RemovalListener on_removal = nullptr) {
    if (options.ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("CacheOptions::ttl must be > 0");
    }
    std::unique_ptr<Cache> cache;
    try {
      cache = absl::WrapUnique(new Cache(options, std::move(on_removal)));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the cache");
    }
    Cache* self = cache.get();
    auto wheel = Wheel::Create(options.wheel,
                               [self](std::uint64_t gen, std::uint32_t node) {
                                 self->OnTimer(gen, node);
                               });
    if (!wheel.ok()) return wheel.status();
    cache->wheel_ = *std::move(wheel);
    return cache;
  }

  // Stops the wheel (waiting for a listener call in flight on it), then
  // destroys the values still present without calling the listener. After
  // it returns no listener call runs. Must not run inside the listener.
  ~Cache() {
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
  // then). Cost: one shard lock and probe, one wheel command (two when
  // replacing), an eviction when full.
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
      status = SetLocked(s, std::move(key), std::move(value), ttl, h, removals);
    }
    Notify(removals);
    return status;
  }
  template <typename Rep, typename Period>
  absl::Status Set(K key, V value, std::chrono::duration<Rep, Period> ttl) {
    return Set(std::move(key), std::move(value), internal::ToDuration(ttl));
  }

  // Removes `key`; true if it was present and unexpired (listener:
  // kExplicit; an expired entry not yet removed by the wheel goes with
  // kExpired and counts as absent). Cost: one shard lock and probe, one
  // wheel command.
  bool Delete(const K& key) {
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    Removals removals;
    bool present = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      const std::uint32_t i = FindLocked(s, key, h);
      if (i != internal::kCacheNil) {
        present = NowNs() < s.pool.at(i).deadline;
        RemoveLocked(s, i, h.tag,
                     present ? RemovalCause::kExplicit : RemovalCause::kExpired,
                     /*remove_timer=*/true, removals);
      }
    }
    Notify(removals);
    return present;
  }

  // Get, and on a miss calls load() once for all the threads missing `key`
  // at the same time; each gets its result. An OK result is stored with
  // options.ttl; an error is returned to every waiter and not stored; an
  // exception from load becomes Internal for every waiter. No lock is held
  // while load runs, so it may call the cache. InvalidArgument for an empty
  // load. Cost: a hit costs as Get; a miss adds a flight record (one
  // allocation) and a Set.
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
        leader = true;
      }
      flight = it->second;
    }
    if (!leader) return flight->Wait();

    absl::StatusOr<V> result;
    try {
      result = load();
    } catch (...) {
      result = absl::InternalError("load threw an exception");
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
      if (result.ok()) {
        absl::Status st = SetLocked(s, key, *result, options_.ttl, h, removals);
        if (!st.ok()) result = st;
      }
    }
    flight->Finish(result);
    Notify(removals);
    return result;
  }

  // Removes every entry (listener: kExplicit, or kExpired for an entry
  // expired but not yet removed by the wheel), one shard at a time. Cost:
  // O(entries), one wheel command per entry with a timer.
  void Clear() {
    for (auto& sp : shards_) {
      Shard& s = *sp;
      Removals removals;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        const std::int64_t now = NowNs();
        s.index.ForEach([&](std::uint32_t i) {
          auto& n = s.pool.at(i);
          if (n.ttl != kNever) wheel_->RemoveTimer(n.gen()).IgnoreError();
          const RemovalCause cause = now >= n.deadline
                                         ? RemovalCause::kExpired
                                         : RemovalCause::kExplicit;
          if (cause == RemovalCause::kExpired) {
            s.expired.fetch_add(1, std::memory_order_relaxed);
          }
          Collect(s, i, cause, removals);
        });
        s.index.Clear();
        s.pool.DestroyAll();  // every node is free: give the chunks back
        if (s.capacity != 0) s.policy.Clear();
        s.last_hit = internal::kCacheNil;
        s.size.store(0, std::memory_order_relaxed);
      }
      Notify(removals);
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
    return st;
  }

 private:
  // Wheel key: the generation (unique per stored value, shard number in its
  // low bits); wheel value: the node's index in its shard's pool.
  using Wheel = TimingWheel<std::uint64_t, std::uint32_t>;
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
      : options_(options), listener_(std::move(on_removal)) {
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
      s->id = k;
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

  static std::int64_t ToNs(absl::Duration d) {
    if (d == absl::InfiniteDuration()) return kNever;
    const std::int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates
    return std::max<std::int64_t>(ns, 1);
  }
  static std::int64_t Deadline(std::int64_t now, std::int64_t ttl) {
    return ttl >= kNever - now ? kNever : now + ttl;
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
    // Sliding costs no wheel command: the timer, when it fires, sees the
    // later deadline and re-arms itself for the time left.
    if (options_.sliding) n.deadline = Deadline(now, n.ttl);
    if (s.capacity != 0) s.policy.OnAccess(s.pool, i, h.mixed);
    s.last_hit = i;
    s.hits.fetch_add(1, std::memory_order_relaxed);
    return i;
  }

  absl::Status SetLocked(Shard& s, K key, V value, absl::Duration ttl,
                         const Hashed& h, Removals& removals) {
    const std::int64_t now = NowNs();
    const std::int64_t ttl_ns = ToNs(ttl);
    const std::uint64_t gen = (++s.generations << shard_bits_) | s.id;
    const std::uint32_t found = FindLocked(s, key, h);
    if (found != internal::kCacheNil) {
      // Replaced in place, under a new generation: the old timer (removed
      // best effort) can only ever find a mismatch.
      auto& n = s.pool.at(found);
      if (ttl_ns != kNever) {
        absl::Status st = wheel_->SetTimer(gen, found, ttl);
        if (!st.ok()) return st;
      }
      if (n.ttl != kNever) wheel_->RemoveTimer(n.gen()).IgnoreError();
      const RemovalCause cause =
          now >= n.deadline ? RemovalCause::kExpired : RemovalCause::kReplaced;
      if (cause == RemovalCause::kExpired) {
        s.expired.fetch_add(1, std::memory_order_relaxed);
      }
      if (listener_) {
        removals.emplace_back(std::move(key), std::move(n.value()), cause);
      }
      n.value() = std::move(value);
      n.set_gen(gen);
      n.ttl = ttl_ns;
      n.deadline = Deadline(now, ttl_ns);
      if (s.capacity != 0) s.policy.OnAccess(s.pool, found, h.mixed);
      return absl::OkStatus();
    }
    const std::uint32_t i =
        s.pool.Allocate(std::move(key), std::move(value), gen);
    if (ttl_ns != kNever) {
      absl::Status st = wheel_->SetTimer(gen, i, ttl);
      if (!st.ok()) {
        s.pool.Free(i);
        return st;
      }
    }
    auto& n = s.pool.at(i);
    n.ttl = ttl_ns;
    n.deadline = Deadline(now, ttl_ns);
    s.index.Insert(h.tag, i);
    s.size.store(s.index.size(), std::memory_order_relaxed);
    if (s.capacity != 0) {
      s.policy.OnInsert(s.pool, i, h.mixed);
      while (s.index.size() > s.capacity) {
        const std::uint32_t v =
            s.policy.Victim(s.pool, i, s.last_hit, [this, &s](std::uint32_t j) {
              return HashOf(s.pool.at(j).key()).mixed;
            });
        if (v == internal::kCacheNil) break;
        const RemovalCause cause = now >= s.pool.at(v).deadline
                                       ? RemovalCause::kExpired
                                       : RemovalCause::kSize;
        RemoveLocked(s, v, HashOf(s.pool.at(v).key()).tag, cause,
                     /*remove_timer=*/true, removals);
      }
    }
    return absl::OkStatus();
  }

  // Takes node i (index hash bits `tag`) out of shard s: index, policy,
  // timer (best effort), counters; its key and value go to `removals` when
  // there is a listener.
  void RemoveLocked(Shard& s, std::uint32_t i, std::uint32_t tag,
                    RemovalCause cause, bool remove_timer, Removals& removals) {
    auto& n = s.pool.at(i);
    if (remove_timer && n.ttl != kNever) {
      wheel_->RemoveTimer(n.gen()).IgnoreError();
    }
    s.index.Erase(tag, i);
    if (s.capacity != 0) s.policy.OnRemove(s.pool, i);
    if (cause == RemovalCause::kExpired) {
      s.expired.fetch_add(1, std::memory_order_relaxed);
    } else if (cause == RemovalCause::kSize) {
      s.evicted.fetch_add(1, std::memory_order_relaxed);
    }
    Collect(s, i, cause, removals);
    s.size.store(s.index.size(), std::memory_order_relaxed);
    // Emptied (a mass expiry): give the node chunks back. Stale timers may
    // still name old indices; they find no node or another generation. One
    // chunk is kept, so a shard going 0 <-> 1 entries does not churn.
    if (s.index.size() == 0 && s.pool.extent() > Shard::Pool::kChunk) {
      s.pool.DestroyAll();
    }
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

  // The wheel's callback: timer `gen` for node `node` is due.
  void OnTimer(std::uint64_t gen, std::uint32_t node) {
    Shard& s = *shards_[gen & ((std::uint64_t{1} << shard_bits_) - 1)];
    Removals removals;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      // A stale timer (its value replaced, deleted or evicted) finds
      // another generation, or a free node (generation 0), and does nothing.
      if (node >= s.pool.extent() || s.pool.at(node).gen() != gen) return;
      auto& n = s.pool.at(node);
      const std::int64_t now = NowNs();
      bool expire = now >= n.deadline;
      if (!expire) {
        // Slid since the timer was set: re-arm for the time left.
        if (!wheel_->SetTimer(gen, node, absl::Nanoseconds(n.deadline - now))
                 .ok()) {
          expire = true;  // only when a bounded wheel queue is full
        }
      }
      if (expire) {
        RemoveLocked(s, node, HashOf(n.key()).tag, RemovalCause::kExpired,
                     /*remove_timer=*/false, removals);
      }
    }
    Notify(removals);
  }

  void Notify(Removals& removals) {
    for (auto& [k, v, cause] : removals) {
      listener_(std::move(k), std::move(v), cause);
    }
  }

  const CacheOptions options_;
  const RemovalListener listener_;
  Hash hash_;
  Eq eq_;
  int shard_bits_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<std::uint64_t> loads_{0}, load_failures_{0};
  std::unique_ptr<Wheel> wheel_;  // last: stopped first, by ~Cache
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_CACHE_H_
