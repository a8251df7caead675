// Cache<K, V>'s implementation: the shards, their expiry buckets on the
// cache's own TimingWheel, the listener calls outside every lock, and the
// load flights. Cache (timingwheel/cache.h) inherits it privately and
// forwards each public call; the contract is there.
//
// Locking: each shard's mutex guards its table, pool, policy, buckets and
// flights for writers; the counters are relaxed atomics read without it.
// A Get reads without the lock (GetShared): the index, the node and its
// value, inside a read section of the cache's epochs (epoch.h), so a
// writer retires what it removes and frees it only once no Get can be
// reading it (ReclaimLocked); its hit goes to the shard's read buffer for
// the policy. docs/cache.md, "Reads without a lock", argues why a Get
// returns only a value the key held during the call. The listener
// and load() run with no lock held, so they may call the cache, or destroy
// it: UserCallFrame and CacheGate make the call that did so touch nothing
// after.
//
// Why over 450 lines: one class whose calls all share three protocols: a
// write takes the shard's lock, collects removals, ends with FinishLocked
// (freeing what no Get can still read), releases the lock, then Notifies
// and touches nothing if the cache is gone; a Get reads only inside a read
// section, and only what writers never change in place but a one-word
// value under its deadline's mark (ReadShared); and whoever changes an
// entry, under the lock or not (SetWithoutLock), takes it by a swap of its
// settled deadline. The parts that stand alone already live beside it
// (shard, index, node, pool, stored key, policy, sketch, read buffer,
// epochs, flight, gate). Split, a reader must hold every file to check
// that a call keeps the protocols.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_
#define TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/base/latency_recorder.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/internal/cache/flight.h"
#include "timingwheel/internal/cache/gate.h"
#include "timingwheel/internal/cache/pool.h"
#include "timingwheel/internal/cache/shard.h"
#include "timingwheel/internal/cache/stored_key.h"
#include "timingwheel/internal/time/cycle_clock.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {

namespace internal {

// Tests' way into a Cache's implementation (a friend of Cache): to run
// CheckInvariants, and to break a structure on purpose to see it caught.
class CacheTestPeer;

template <typename K, typename V, typename Hash, typename Eq>
class CacheImpl {
 public:
  // Cache::RemovalListener and Cache::Loader (cache.h).
  using RemovalListener =
      std::function<void(K key, V value, RemovalCause cause)>;
  using Loader = std::function<absl::StatusOr<V>()>;

  // Create's checks: ttl > 0, and the wheel's options as the user wrote
  // them (the wheel below is created with max_pending and max_lag cleared,
  // so a bad max_lag would otherwise pass unseen).
  static absl::Status Validate(const CacheOptions& options) {
    if (options.ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("CacheOptions::ttl must be > 0");
    }
    return ValidateOptions(options.wheel);
  }

  // Create's second half: the cache's wheel, whose callback files and
  // expires this cache's buckets.
  absl::Status StartWheel() {
    CacheImpl* self = this;
    std::shared_ptr<CacheGate> gate = gate_;
    // The cache's wheel is never refused for room or for lag: a refused
    // re-file of a slid entry (in OnBucket) would have to expire it early
    // or lose its timer, and a refused bucket would fail a Set. Its
    // commands are one per new bucket, so the queue stays short without a
    // bound.
    Options wheel_options = options_.wheel;
    wheel_options.max_pending = 0;
    wheel_options.max_lag = absl::ZeroDuration();
    auto wheel = Wheel::Create(
        wheel_options, [self, gate](BucketKey bucket, std::uint32_t shard) {
          if (!gate->Enter()) return;
          struct Leave {
            CacheGate& gate;
            const CacheImpl* const outer;
            ~Leave() {
              in_bucket_of_ = outer;
              gate.Leave();
            }
          } leave{*gate, std::exchange(in_bucket_of_, self)};
          self->OnBucket(bucket.first, shard);  // may destroy *self
        });
    if (!wheel.ok()) return wheel.status();
    interval_ns_ = std::max<std::int64_t>(
        1, absl::ToInt64Nanoseconds(options_.wheel.interval));
    wheel_ = *std::move(wheel);
    // Where the wheel's time 0 lies on the steady clock: read a moment
    // early, so NowNs() errs ahead, never behind.
    const std::int64_t steady = SteadyNowNs();
    wheel_start_ns_ = steady - absl::ToInt64Nanoseconds(wheel_->Now());
    return absl::OkStatus();
  }

  // ~Cache (cache.h): stops the wheel, waiting for the listener calls in
  // flight on other threads, then the members destroy the values left.
  ~CacheImpl() {
    UserCallFrame::MarkDestroyed(this);
    // From a listener inside this thread's OnBucket, that call is ours and
    // returns untouched; any other must end before the memory goes.
    gate_->Close(in_bucket_of_ == this ? 1 : 0);
    // Refused inside the wheel's own callback; destroying it there returns
    // at once all the same (api.md E12).
    if (wheel_ != nullptr) wheel_->Stop().IgnoreError();
  }

  CacheImpl(const CacheImpl&) = delete;
  CacheImpl& operator=(const CacheImpl&) = delete;

  // Whether Get takes a key of type Q as it is, without building a K
  // (cache.h): a string-view-like Q for std::string keys under the default
  // Hash and Eq (HashOf then hashes every key as a std::string_view), or
  // any Q when Hash and Eq are both transparent.
  static constexpr bool kDefaultStringKey = kCacheStringKey<K, Hash, Eq>;
  static constexpr bool kTransparent = requires {
    typename Hash::is_transparent;
    typename Eq::is_transparent;
  };
  template <typename Q>
  static constexpr bool kLookupKey =
      !std::is_same_v<std::remove_cvref_t<Q>, K> &&
      ((kDefaultStringKey &&
        std::is_convertible_v<const Q&, std::string_view>) ||
       kTransparent);

  // Cache::Get (cache.h); Q is K, or a lookup key (kLookupKey).
  template <typename Q>
  std::optional<V> Get(const Q& key) {
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    if (std::optional<std::optional<V>> v = GetShared(s, key, h, true)) {
      return *std::move(v);
    }
    MutexLock lock(s.mu);
    const std::uint32_t i = HitLocked(s, key, h);
    if (i == kCacheNil) return std::nullopt;
    return ValueLocked(s.pool.at(i));
  }

  // Cache::Set (cache.h).
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
    if (SetWithoutLock(s, key, value, ttl, h, removals)) {
      Notify(removals);  // may have destroyed the cache: touch nothing after
      return absl::OkStatus();
    }
    absl::Status status;
    {
      MutexLock lock(s.mu);
      SupersedeLoadLocked(s, key);
      status = SetLocked(s, std::move(key), std::move(value), ttl, h, removals);
      FinishLocked(s);
    }
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return status;
  }

  // Cache::Delete (cache.h).
  bool Delete(const K& key) {
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    Removals removals;
    bool present = false;
    {
      MutexLock lock(s.mu);
      SupersedeLoadLocked(s, key);
      const std::uint32_t i = FindLocked(s, key, h);
      if (i != kCacheNil) {
        present = RemoveLocked(s, i, h.tag, RemovalCause::kExplicit, NowNs(),
                               removals) == RemovalCause::kExplicit;
      }
      FinishLocked(s);
    }
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return present;
  }

  // Cache::GetOrLoad (cache.h).
  absl::StatusOr<V> GetOrLoad(const K& key, const Loader& load) {
    if (!load) return absl::InvalidArgumentError("load is empty");
    const Hashed h = HashOf(key);
    Shard& s = *shards_[h.shard];
    if (std::optional<std::optional<V>> v = GetShared(s, key, h, false)) {
      return **std::move(v);
    }
    std::shared_ptr<CacheFlight<V>> flight;
    bool leader = false;
    {
      MutexLock lock(s.mu);
      // Announced before the lookup: a Set without the lock (SetWithoutLock)
      // that could change this key after it sees the announcement and
      // takes the lock instead, so a load it outdates is superseded.
      s.loads_open.fetch_add(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      struct Close {
        Shard& s;
        bool keep = false;
        ~Close() {
          if (!keep) s.loads_open.fetch_sub(1, std::memory_order_relaxed);
        }
      } close{s};
      const std::uint32_t i = HitLocked(s, key, h);
      if (i != kCacheNil) return ValueLocked(s.pool.at(i));
      auto [it, inserted] = s.flights.try_emplace(key);
      if (inserted) {
        it->second = std::make_shared<CacheFlight<V>>();
        it->second->leader = std::this_thread::get_id();
        leader = true;
        close.keep = true;  // until the flight ends
      } else if (it->second->leader == std::this_thread::get_id()) {
        // Called from this key's own load(), directly or through other
        // keys' loads: waiting would wait for itself.
        return absl::FailedPreconditionError(
            "GetOrLoad: the load() of this key asked for the same key");
      }
      flight = it->second;
    }
    if (!leader) return flight->Wait();

    absl::StatusOr<V> result;
    bool destroyed;
    const auto load_start = std::chrono::steady_clock::now();
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
    load_latency_.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - load_start)
                             .count());
    if (result.ok()) {
      loads_.fetch_add(1, std::memory_order_relaxed);
    } else {
      load_failures_.fetch_add(1, std::memory_order_relaxed);
    }
    Removals removals;
    {
      MutexLock lock(s.mu);
      // Under the same lock as storing: a caller arriving now finds the
      // value, or (after an error) starts a new load.
      s.flights.erase(key);
      s.loads_open.fetch_sub(1, std::memory_order_relaxed);
      if (result.ok() && flight->superseded) {
        // As if stored and at once replaced by the later write: every
        // value a load returns leaves through the listener exactly once.
        CountRemoval(s, RemovalCause::kReplaced);
        if (listener_)
          removals.emplace_back(key, *result, RemovalCause::kReplaced);
      } else if (result.ok()) {
        absl::Status st = SetLocked(s, key, *result, options_.ttl, h, removals);
        if (!st.ok()) result = st;
      }
      FinishLocked(s);
    }
    flight->Finish(result);
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return result;
  }

  // Cache::Clear (cache.h).
  void Clear() {
    for (auto& sp : shards_) {
      Shard& s = *sp;
      Removals removals;
      {
        MutexLock lock(s.mu);
        const std::int64_t now = NowNs();
        std::vector<std::uint32_t> nodes;
        nodes.reserve(s.index.size());
        s.index.ForEach([&](std::uint32_t i) { nodes.push_back(i); });
        s.index.Clear();  // before retiring: no Get reaches them after
        for (const std::uint32_t i : nodes) {
          Unfile(s, i);
          Collect(s, i, RemovalCause::kExplicit, now, removals);
        }
        for (auto& [key, flight] : s.flights) flight->superseded = true;
        if (s.capacity != 0) s.policy.Clear();
        s.last_hit = kCacheNil;
        s.size.store(0, std::memory_order_relaxed);
        FinishLocked(s);
      }
      if (Notify(removals)) return;  // destroyed from the listener
    }
  }

  // Cache::size (cache.h).
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size.load(std::memory_order_relaxed);
    return n;
  }

  // Cache::stats (cache.h).
  CacheStats stats() const {
    CacheStats st;
    for (const auto& s : shards_) {
      st.hits += s->hits.load(std::memory_order_relaxed);
      st.misses += s->misses.load(std::memory_order_relaxed);
      st.expired += s->expired.load(std::memory_order_relaxed);
      st.evicted += s->evicted.load(std::memory_order_relaxed);
      st.deleted += s->deleted.load(std::memory_order_relaxed);
      st.replaced += s->replaced.load(std::memory_order_relaxed);
      st.size += s->size.load(std::memory_order_relaxed);
    }
    const int readers = CacheReaderSlotRegistry::Get().high_water();
    for (int i = 0; i < readers; ++i) {
      st.hits += epochs_.slot(i).hits.load(std::memory_order_relaxed);
      st.misses += epochs_.slot(i).misses.load(std::memory_order_relaxed);
      st.replaced += epochs_.slot(i).replaced.load(std::memory_order_relaxed);
    }
    st.loads = loads_.load(std::memory_order_relaxed);
    st.load_failures = load_failures_.load(std::memory_order_relaxed);
    st.load_latency = load_latency_.Snapshot();
    st.listener_exceptions =
        listener_exceptions_.load(std::memory_order_relaxed);
    return st;
  }

  // Each shard's CheckInvariants (shard.h), under its lock: the first
  // broken invariant, or OK. O(nodes); for tests and checking builds.
  absl::Status CheckInvariants() {
    for (const auto& sp : shards_) {
      Shard& s = *sp;
      MutexLock lock(s.mu);
      TW_RETURN_IF_ERROR(
          s.CheckInvariants([this](const StoredKey& k) { return HashOf(k); },
                            [this](const StoredKey& a, const StoredKey& b) {
                              return KeyIs(a, b);
                            }));
    }
    return absl::OkStatus();
  }

  // Wheel key: an expiry bucket (tick, shard); wheel value: the shard.
  using BucketKey = std::pair<std::int64_t, std::uint32_t>;
  using Wheel = TimingWheel<BucketKey, std::uint32_t>;
  using Shard = CacheShard<K, V, Hash, Eq>;
  using StoredKey = typename Shard::StoredKey;
  using Node = CacheNode<StoredKey, V>;
  using Removals = std::vector<std::tuple<K, V, RemovalCause>>;

  // A key's hash, split: which shard, and the 32 bits its index keeps (and
  // the frequency sketch counts, so that a Get's record carries them).
  struct Hashed {
    std::size_t shard;
    std::uint32_t tag;
  };

  static constexpr std::int64_t kNever =
      std::numeric_limits<std::int64_t>::max();
  // The "tick" of a shard's reclaim timer (FinishLocked): no bucket's.
  static constexpr std::int64_t kReclaimTick = -1;
  static constexpr int kMaxShardBits = 6;
  // A bounded cache keeps at least this many entries per shard, so that each
  // shard's policy has room to choose.
  static constexpr std::size_t kMinShardCapacity = 128;

  CacheImpl(const CacheOptions& options, RemovalListener on_removal)
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
      // Shares that sum to max_entries, so the total never exceeds it.
      const std::size_t capacity =
          options.max_entries == 0
              ? 0
              : options.max_entries / n + (k < options.max_entries % n);
      shards_.push_back(std::make_unique<Shard>(hash_, eq_,
                                                static_cast<std::uint32_t>(k),
                                                capacity, options.sliding));
    }
  }

  template <typename Q>
  Hashed HashOf(const Q& key) const {
    // Mixed fully (base/hash.h): good bits everywhere even for an identity
    // Hash. The shard takes the top bits, the index the low ones.
    std::uint64_t raw;
    if constexpr (kDefaultStringKey) {
      // Both a std::string and a lookup key are hashed as the
      // std::string_view they are: absl::Hash<std::string> differs.
      raw = absl::Hash<std::string_view>{}(AsView(key));
    } else {
      raw = static_cast<std::uint64_t>(hash_(key));
    }
    const std::uint64_t x = MixHash(raw);
    return Hashed{shard_bits_ == 0 ? 0 : x >> (64 - shard_bits_),
                  static_cast<std::uint32_t>(x)};
  }

  // The wheel's time (TimingWheel::Now) in ns. Under a ticker, exactly
  // that. In real time, read from the cycle counter (CycleClock): never
  // behind the steady clock, at most CycleClock::kMaxAheadNs ahead, and
  // without the serializing read of steady_clock, which would keep a Get's
  // memory accesses from overlapping the next one's. So Get never returns
  // an entry past its deadline, and may count one as expired that much
  // early.
  std::int64_t NowNs() const {
    if (manual_time_) return absl::ToInt64Nanoseconds(wheel_->Now());
    return CycleClock::NanosNotBefore() - wheel_start_ns_;
  }
  static std::int64_t SteadyNowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // A time to live in ns; kTtlNever for never (and for anything longer
  // than about 146 years).
  static constexpr std::int64_t kTtlNever = CacheNodeExtra::kTtlNever;
  static std::int64_t ToNs(absl::Duration d) {
    if (d == absl::InfiniteDuration()) return kTtlNever;
    const std::int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates
    return std::clamp<std::int64_t>(ns, 1, kTtlNever);
  }
  // now + ttl; kNever for never, and for deadlines beyond about 73 years
  // (so tick arithmetic cannot overflow).
  static std::int64_t Deadline(std::int64_t now, std::int64_t ttl) {
    if (ttl == kTtlNever || ttl >= kNever / 4 - now) return kNever;
    return now + ttl;
  }

  // A Set, Delete or Clear of `key` is under way: a load of it in flight
  // must not store its (older) value afterwards. A compare when no load is
  // in flight in the shard.
  static void SupersedeLoadLocked(Shard& s, const K& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (s.flights.empty()) return;
    auto it = s.flights.find(key);
    if (it != s.flights.end()) it->second->superseded = true;
  }

  // A string key, stored or given, as the view it is hashed and compared
  // as (kDefaultStringKey only).
  static std::string_view AsView(const CacheInlineString& key) {
    return key.view();
  }
  template <typename Q>
  static std::string_view AsView(const Q& key) {
    return std::string_view(key);
  }

  // A stored key as a K, for the listener.
  static K CopyKey(const StoredKey& key) {
    if constexpr (kDefaultStringKey) {
      return key.ToString();
    } else {
      return key;
    }
  }

  // Whether stored key `stored` is `key` (a K, a stored key or a lookup
  // key).
  template <typename Q>
  bool KeyIs(const StoredKey& stored, const Q& key) const {
    if constexpr (kDefaultStringKey) {
      return AsView(stored) == AsView(key);
    } else {
      return eq_(stored, key);
    }
  }

  template <typename Q>
  std::uint32_t FindLocked(Shard& s, const Q& key, const Hashed& h)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.index.Find(h.tag, [&](std::uint32_t i) {
      s.mu.AssumeHeld();  // called by Find, under the lock
      return KeyIs(s.pool.at(i).key(), key);
    });
  }

  // Looks `key` up; on a hit counts it, slides it, updates the policy and
  // returns the node; on a miss (absent or expired) counts it and returns
  // kCacheNil. The clock is read under the lock, so an entry cannot expire
  // between the check and the caller's copy.
  template <typename Q>
  std::uint32_t HitLocked(Shard& s, const Q& key, const Hashed& h)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const std::uint32_t i = FindLocked(s, key, h);
    const std::int64_t now = NowNs();
    if (i == kCacheNil || !Slide(s.pool.at(i), now)) {
      s.misses.fetch_add(1, std::memory_order_relaxed);
      return kCacheNil;
    }
    if (s.capacity != 0) s.policy.OnAccess(s.pool, i, h.tag);
    s.last_hit = i;
    s.hits.fetch_add(1, std::memory_order_relaxed);
    return i;
  }

  // Whether entry n is unexpired at `now`, with sliding restarting its time
  // to live if so. Sliding costs no wheel command and no relink: when the
  // entry's bucket fires, it sees the later deadline and moves the entry
  // on. A compare-and-swap, because OnBucket expires an entry by swapping
  // its deadline for kRetired: a slide either lands first (the bucket sees
  // the later deadline) or finds the entry gone (a miss), never lost.
  bool Slide(Node& n, std::int64_t now) const {
    for (;;) {
      std::int64_t d = n.deadline_settled();
      if (d < 0 || now >= d) return false;  // removed, or expired
      if (!options_.sliding || d == kNever) return true;
      // Sliding: the pool has extras.
      const std::int64_t later =
          Deadline(now, Shard::Pool::SharedExtra(n).ttl());
      if (later <= d) return true;
      if (n.deadline.compare_exchange_weak(d, later,
                                           std::memory_order_relaxed)) {
        return true;
      }
    }
  }

  // Entry n's value, read under the shard's lock after a hit: as a Get
  // reads it (ReadShared), since a Set without the lock may be storing it
  // in place meanwhile; that Set only moves the deadline later, so the hit
  // stands.
  V ValueLocked(const Node& n) const {
    if constexpr (Node::kValueInPlace) {
      for (;;) {
        const std::int64_t d = n.deadline_settled();
        const V v = n.LoadValue();
        std::atomic_thread_fence(std::memory_order_acquire);
        if (n.deadline.load(std::memory_order_relaxed) == d) return v;
      }
    } else {
      return n.value();
    }
  }

  // What a Get found in an entry's node without the lock (ReadShared).
  enum class SharedRead {
    kHit,      // unexpired (and slid, if sliding): its value
    kExpired,  // past its deadline, not yet removed
    kGone,     // removed, or being written: look again under the lock
  };

  // A Get's read of node n, which the index named, at `now`: on a hit its
  // value goes to `value`. A value stored in place (Node::kValueInPlace,
  // ReplaceInPlaceLocked) is read between two loads of the deadline, as a
  // sequence lock reads: the writer marks the deadline kWriting before it
  // stores the value and sets a strictly later deadline after, and slides
  // only move it later, so two equal loads mean that no write began or
  // ended between them and the value belongs with that deadline. A read
  // that keeps meeting writes gives up to the lock.
  SharedRead ReadShared(Node& n, std::int64_t now,
                        std::optional<V>& value) const {
    if constexpr (Node::kValueInPlace) {
      constexpr int kTries = 4;
      for (int t = 0; t < kTries; ++t) {
        const std::int64_t d = n.deadline.load(std::memory_order_acquire);
        if (d == Node::kWriting) continue;  // a write of a few instructions
        if (d < 0) return SharedRead::kGone;
        const V v = n.LoadValue();
        std::atomic_thread_fence(std::memory_order_acquire);
        if (n.deadline.load(std::memory_order_relaxed) != d) continue;
        if (now >= d) return SharedRead::kExpired;
        if (!SlideFrom(n, d, now)) continue;
        value.emplace(v);
        return SharedRead::kHit;
      }
      return SharedRead::kGone;
    } else {
      if (!Slide(n, now)) {
        return n.deadline.load(std::memory_order_relaxed) < 0
                   ? SharedRead::kGone
                   : SharedRead::kExpired;
      }
      value.emplace(n.value());
      return SharedRead::kHit;
    }
  }

  // Slide's step for a Get that read deadline d of an unexpired entry:
  // false if the deadline changed meanwhile (read it again).
  bool SlideFrom(Node& n, std::int64_t d, std::int64_t now) const {
    if (!options_.sliding || d == kNever) return true;
    const std::int64_t later = Deadline(now, Shard::Pool::SharedExtra(n).ttl());
    return later <= d || n.deadline.compare_exchange_strong(
                             d, later, std::memory_order_relaxed);
  }

  // The lock-free Get: a hit's value; with `misses`, nullopt inside for a
  // miss (the key absent, or present but expired), counted; nullopt
  // outside when the caller must look again under the lock: the index
  // could not tell (an erase was shifting slots), the key was found
  // removed, this thread has no reader slot, or (without `misses`) a miss.
  //
  // Outside the analysis of -Wthread-safety on purpose: it reads the index
  // and pool without the lock, through the calls made for it (FindShared,
  // SharedAt), which the epochs keep safe.
  template <typename Q>
  std::optional<std::optional<V>> GetShared(Shard& s, const Q& key,
                                            const Hashed& h, bool misses)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::optional<std::optional<V>> out;
    std::uint32_t hit = kCacheNil;
    int reader = 0;
    {
      CacheReadSection read(epochs_);
      if (!read.active()) return out;
      bool absent;
      const std::uint32_t i = FindShared(s, key, h, absent);
      if (i == kCacheNil) {
        if (!absent || !misses) return out;
        read.slot().Count(read.slot().misses);
        out.emplace();
        return out;
      }
      Node& n = s.pool.SharedAt(i);
      std::optional<V> value;
      switch (ReadShared(n, NowNs(), value)) {
        case SharedRead::kGone:
          return out;
        case SharedRead::kExpired:  // not yet removed
          if (!misses) return out;
          read.slot().Count(read.slot().misses);
          out.emplace();
          return out;
        case SharedRead::kHit:
          break;
      }
      out.emplace(std::move(value));
      read.slot().Count(read.slot().hits);
      hit = i;
      reader = read.index();
    }
    if (s.reads != nullptr && s.reads->Record(reader, hit, h.tag) &&
        s.mu.TryLock()) {
      DrainReadsLocked(s);
      s.mu.Unlock();
    }
    return out;
  }

  // The node of `key` in shard s, looked up without the lock inside a read
  // section (CacheIndex::FindShared): kCacheNil if not found, then
  // `absent` tells whether the miss can be trusted.
  template <typename Q>
  std::uint32_t FindShared(const Shard& s, const Q& key, const Hashed& h,
                           bool& absent) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return s.index.FindShared(
        h.tag,
        [&](std::uint32_t j) { return KeyIs(SharedNode(s, j).key(), key); },
        absent);
  }

  // Node j of shard s, for a Get in its read section (Pool::SharedAt).
  static const Node& SharedNode(const Shard& s, std::uint32_t j)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return s.pool.SharedAt(j);
  }

  // Applies the hits Gets recorded to the policy. A record may name a node
  // removed (or reused) since: only entries are moved.
  void DrainReadsLocked(Shard& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    s.reads->Drain([&](std::uint32_t i, std::uint32_t tag) {
      s.mu.AssumeHeld();  // called by Drain, under the lock
      if (i >= s.pool.extent() || !s.pool.at(i).is_entry()) return;
      s.policy.OnAccess(s.pool, i, tag);
      s.last_hit = i;
    });
  }

  absl::Status SetLocked(Shard& s, K key, V value, absl::Duration ttl,
                         const Hashed& h, Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const std::int64_t now = NowNs();
    const std::int64_t ttl_ns = ToNs(ttl);
    const std::int64_t deadline = Deadline(now, ttl_ns);
    if (s.reads != nullptr) DrainReadsLocked(s);
    const std::uint32_t old = FindLocked(s, key, h);
    if constexpr (Node::kValueInPlace) {
      if (old != kCacheNil &&
          ReplaceInPlaceLocked(s, old, value, ttl_ns, deadline, now, h.tag,
                               removals)) {
        return absl::OkStatus();
      }
    }
    // The bucket before any change: its timer is the only wheel command,
    // and if the wheel refuses it nothing has changed yet.
    std::uint32_t bucket = kCacheNil;
    if (deadline != kNever) {
      absl::StatusOr<std::uint32_t> b = BucketFor(s, TickOf(deadline), now);
      if (!b.ok()) return b.status();
      bucket = *b;
    }
    // A new node, complete before the index names it. A replaced value gets
    // one too (but for ReplaceInPlaceLocked's): Gets may be copying the old
    // value now, so it stays until they are done (ReclaimLocked).
    const std::uint32_t i = s.pool.Allocate(std::move(key), std::move(value));
    auto& n = s.pool.at(i);
    if (s.pool.has_extras()) s.pool.extra(i).set_ttl(ttl_ns);
    n.set_deadline(deadline);
    if (bucket != kCacheNil) File(s, i, bucket);
    if (old != kCacheNil) {
      s.index.Replace(h.tag, old, i);
      Unfile(s, old);
      if (s.capacity != 0) {
        s.policy.Replace(s.pool, old, i);
        s.policy.OnAccess(s.pool, i, h.tag);
      }
      if (s.last_hit == old) s.last_hit = i;
      Collect(s, old, RemovalCause::kReplaced, now, removals);
    } else {
      s.index.Insert(h.tag, i);
      s.size.store(s.index.size(), std::memory_order_relaxed);
      if (s.capacity != 0) s.policy.OnInsert(s.pool, i, h.tag);
    }
    if (s.capacity != 0) {
      while (s.index.size() > s.capacity) {
        const std::uint32_t v =
            s.policy.Victim(s.pool, i, s.last_hit, [this, &s](std::uint32_t j) {
              s.mu.AssumeHeld();  // called by Victim, under the lock
              return HashOf(s.pool.at(j).key()).tag;
            });
        if (v == kCacheNil) break;
        RemoveLocked(s, v, HashOf(s.pool.at(v).key()).tag, RemovalCause::kSize,
                     now, removals);
      }
    }
    return absl::OkStatus();
  }

  // A Set's new value for entry i, stored into its node (Node::
  // kValueInPlace) when its new deadline is later than the one it has: no
  // new node, no index store, nothing retired, and no relink: the entry
  // stays in its bucket, which re-files it when it comes due, as it does a
  // slid entry (OnBucket). So the Set writes no line but its node's and
  // the shard's. Gets read the node meanwhile (ReadShared): the deadline
  // is kWriting while the value changes, and strictly later after. false,
  // with nothing changed, when the deadline would not move later (a
  // shorter time to live than it had, or never): the caller then swaps in
  // a new node.
  bool ReplaceInPlaceLocked(Shard& s, std::uint32_t i, const V& value,
                            std::int64_t ttl_ns, std::int64_t deadline,
                            std::int64_t now, std::uint32_t tag,
                            Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if constexpr (!Node::kValueInPlace) {
      return false;
    } else {
      Node& n = s.pool.at(i);
      // A swap from the settled deadline, so that a slide or a store in
      // place without the lock landing now is not lost: it lands first, or
      // finds the node held.
      std::int64_t was;
      do {
        was = n.deadline_settled();
        if (deadline <= was) return false;  // slides only go later
      } while (!n.deadline.compare_exchange_weak(was, Node::kWriting,
                                                 std::memory_order_acquire));
      std::atomic_thread_fence(std::memory_order_release);
      const RemovalCause cause =
          now >= was ? RemovalCause::kExpired : RemovalCause::kReplaced;
      if (listener_) {
        removals.emplace_back(CopyKey(n.key()), n.LoadValue(), cause);
      }
      n.StoreValue(value);
      if (s.pool.has_extras()) s.pool.extra(i).set_ttl(ttl_ns);
      if (s.capacity != 0) s.policy.OnAccess(s.pool, i, tag);
      CountRemoval(s, cause);
      n.deadline.store(deadline, std::memory_order_release);
      return true;
    }
  }

  // ReplaceInPlaceLocked without the shard's lock, for the commonest Set:
  // a key present and unexpired, given a later deadline, in a cache
  // without a size bound (no policy to tell) whose values are stored in
  // place. It writes no line but the node's and this thread's reader slot,
  // so threads refreshing the same hot keys do not pass the shard's lock
  // and counters between them. The node is taken as a writer under the
  // lock takes it, by swapping its deadline for kWriting; writers under
  // the lock wait such a write out (Node::deadline_settled) and change an
  // entry only by a swap from its settled deadline, so the two never
  // interleave. false, with nothing changed, when the Set must take the
  // lock: the key is absent, expired or being written, the deadline would
  // not move later, this thread has no reader slot, or a GetOrLoad is
  // open on the shard (it may be loading this key: the locked Set marks
  // that load superseded).
  template <typename Q>
  bool SetWithoutLock(Shard& s, const Q& key, const V& value,
                      absl::Duration ttl, const Hashed& h,
                      Removals& removals) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if constexpr (!Node::kValueInPlace) {
      return false;
    } else {
      if (s.capacity != 0) return false;
      CacheReadSection read(epochs_);
      if (!read.active()) return false;
      bool absent;
      const std::uint32_t i = FindShared(s, key, h, absent);
      if (i == kCacheNil) return false;
      Node& n = s.pool.SharedAt(i);
      const std::int64_t now = NowNs();
      const std::int64_t ttl_ns = ToNs(ttl);
      const std::int64_t deadline = Deadline(now, ttl_ns);
      std::int64_t d = n.deadline.load(std::memory_order_acquire);
      if (d < 0 || now >= d || deadline <= d) return false;
      if (!n.deadline.compare_exchange_strong(d, Node::kWriting,
                                              std::memory_order_seq_cst)) {
        return false;
      }
      // Pairs with GetOrLoad's announcement: it either sees kWriting (and
      // waits) or this sees it.
      if (s.loads_open.load(std::memory_order_seq_cst) != 0) {
        n.deadline.store(d, std::memory_order_release);  // value untouched
        return false;
      }
      std::atomic_thread_fence(std::memory_order_release);
      const V old = n.LoadValue();
      n.StoreValue(value);
      if (s.pool.has_extras()) Shard::Pool::SharedExtra(n).set_ttl(ttl_ns);
      n.deadline.store(deadline, std::memory_order_release);
      read.slot().Count(read.slot().replaced);
      // After the write, so that Gets and writers under the lock do not
      // wait out the key's copy: the node stays while the section is open.
      if (listener_) {
        removals.emplace_back(CopyKey(n.key()), old, RemovalCause::kReplaced);
      }
      return true;
    }
  }

  // The tick whose bucket holds deadline d: the first tick at or after it.
  std::int64_t TickOf(std::int64_t d) const {
    return d / interval_ns_ + (d % interval_ns_ != 0);
  }

  // The sentinel of shard s's bucket for `tick`, created with its wheel
  // timer (due at tick * interval) if absent. Errors: the wheel's.
  absl::StatusOr<std::uint32_t> BucketFor(Shard& s, std::int64_t tick,
                                          std::int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
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
  void File(Shard& s, std::uint32_t i, std::uint32_t bucket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    auto& n = s.pool.at(i);
    auto& head = s.pool.at(bucket);
    n.eprev = bucket;
    n.enext = head.enext;
    s.pool.at(head.enext).eprev = i;
    head.enext = i;
  }

  // Unlinks entry i from its bucket, if it is in one. O(1): the lists are
  // circular through their sentinel, so the bucket need not be known.
  void Unfile(Shard& s, std::uint32_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    auto& n = s.pool.at(i);
    if (n.enext == kCacheNil) return;
    s.pool.at(n.eprev).enext = n.enext;
    s.pool.at(n.enext).eprev = n.eprev;
    n.eprev = n.enext = kCacheNil;
  }

  // The end of every write to shard s: frees what was retired long enough
  // ago that no Get can be reading it, moving the cache's epoch on (at most
  // twice) if that is what it waits for; then an empty shard with no bucket
  // left gives its node chunks back (one kept, so a shard going 0 <-> 1
  // entries does not churn). With no Get running, all that this write
  // retired is freed before it returns.
  void FinishLocked(Shard& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    ReclaimLocked(s);
    if (s.index.size() == 0 && s.buckets.empty() && s.retired_nodes.empty() &&
        s.pool.extent() > Shard::Pool::kChunk) {
      std::vector<std::shared_ptr<void>> blocks;
      s.pool.RetireAll(blocks);
      const std::uint64_t e = epochs_.current();
      for (auto& b : blocks) s.retired_blocks.emplace_back(e, std::move(b));
      ReclaimLocked(s);
    }
    // What Gets still held is freed by the shard's next write; in case none
    // comes, a wheel timer comes back for it one interval later (one at a
    // time per shard).
    if ((!s.retired_nodes.empty() || !s.retired_blocks.empty()) &&
        !s.reclaim_armed) {
      s.reclaim_armed = wheel_
                            ->SetTimer(BucketKey{kReclaimTick, s.id}, s.id,
                                       options_.wheel.interval)
                            .ok();
    }
  }

  void ReclaimLocked(Shard& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    {
      std::vector<std::shared_ptr<void>> blocks;
      s.index.TakeRetired(blocks);
      s.pool.TakeRetired(blocks);
      if (!blocks.empty()) {
        const std::uint64_t e = epochs_.current();
        for (auto& b : blocks) s.retired_blocks.emplace_back(e, std::move(b));
      }
    }
    if (s.retired_nodes.empty() && s.retired_blocks.empty()) return;
    std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
    if (!s.retired_nodes.empty()) oldest = s.retired_nodes.front().first;
    if (!s.retired_blocks.empty()) {
      oldest = std::min(oldest, s.retired_blocks.front().first);
    }
    std::uint64_t e = epochs_.current();
    for (int k = 0; k < 2 && e < oldest + 2; ++k) e = epochs_.TryAdvance();
    while (!s.retired_nodes.empty() && s.retired_nodes.front().first + 2 <= e) {
      s.pool.Free(s.retired_nodes.front().second);
      s.retired_nodes.pop_front();
    }
    while (!s.retired_blocks.empty() &&
           s.retired_blocks.front().first + 2 <= e) {
      s.retired_blocks.pop_front();
    }
  }

  // Takes entry i (index hash bits `tag`) out of shard s: index, policy,
  // bucket, counters; its key and value go to `removals` when there is a
  // listener. Returns the cause: `unexpired` (kExplicit, kSize) unless its
  // deadline had passed at `now` (kExpired).
  RemovalCause RemoveLocked(Shard& s, std::uint32_t i, std::uint32_t tag,
                            RemovalCause unexpired, std::int64_t now,
                            Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    Unfile(s, i);
    s.index.Erase(tag, i);
    if (s.capacity != 0) s.policy.OnRemove(s.pool, i);
    if (s.last_hit == i) s.last_hit = kCacheNil;
    const RemovalCause cause = Collect(s, i, unexpired, now, removals);
    s.size.store(s.index.size(), std::memory_order_relaxed);
    return cause;
  }

  // Counts a value leaving shard s, by cause (CacheStats).
  static void CountRemoval(Shard& s, RemovalCause cause) {
    std::atomic<std::uint64_t>* counter = nullptr;
    switch (cause) {
      case RemovalCause::kExpired:
        counter = &s.expired;
        break;
      case RemovalCause::kExplicit:
        counter = &s.deleted;
        break;
      case RemovalCause::kReplaced:
        counter = &s.replaced;
        break;
      case RemovalCause::kSize:
        counter = &s.evicted;
        break;
    }
    if (counter != nullptr) counter->fetch_add(1, std::memory_order_relaxed);
  }

  // Retires node i, to be freed by ReclaimLocked, counts it, and copies its
  // key and value to `removals` (if there is a listener: copies, since
  // Gets may be reading them). The index must no longer lead to i. Retired
  // first: the value is then the last one stored, and no Set without the
  // lock stores another. Returns the cause: `unexpired` unless the
  // deadline it had was past at `now` or it was retired already (an
  // expiry, OnBucket).
  RemovalCause Collect(Shard& s, std::uint32_t i, RemovalCause unexpired,
                       std::int64_t now, Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    const auto& n = s.pool.at(i);
    const std::int64_t d = s.pool.Retire(i);
    const RemovalCause cause =
        d < 0 || now >= d ? RemovalCause::kExpired : unexpired;
    CountRemoval(s, cause);
    if (listener_) removals.emplace_back(CopyKey(n.key()), n.value(), cause);
    // Read after the unlink: a Get that can still reach i announced this
    // epoch or an earlier one.
    s.retired_nodes.emplace_back(epochs_.current(), i);
    return cause;
  }

  // The wheel's callback: bucket `tick` of shard `shard` is due. Its
  // entries past their deadline are removed (kExpired); the others were slid
  // and move to the bucket of their new deadline. Done in batches, with the
  // listener called between them, so the lock is never held for long.
  void OnBucket(std::int64_t tick, std::uint32_t shard) {
    constexpr int kBatch = 256;
    Shard& s = *shards_[shard];
    if (tick == kReclaimTick) {
      MutexLock lock(s.mu);
      s.reclaim_armed = false;
      FinishLocked(s);
      return;
    }
    for (bool done = false; !done;) {
      Removals removals;
      {
        MutexLock lock(s.mu);
        auto it = s.buckets.find(tick);
        if (it == s.buckets.end()) return;
        const std::uint32_t sentinel = it->second;
        const std::int64_t now = NowNs();
        for (int k = 0; k < kBatch; ++k) {
          const std::uint32_t i = s.pool.at(sentinel).enext;
          if (i == sentinel) {
            s.buckets.erase(it);
            s.pool.Free(sentinel);
            done = true;
            break;
          }
          auto& n = s.pool.at(i);
          // Claimed with a swap, so that a Get sliding it or a Set storing
          // in place at this moment either lands first (and it moves on
          // below) or finds it removed.
          std::int64_t d = n.deadline_settled();
          while (now >= d &&
                 !n.deadline.compare_exchange_weak(d, Node::kRetired,
                                                   std::memory_order_acq_rel)) {
            d = n.deadline_settled();
          }
          if (now >= d) {
            RemoveLocked(s, i, HashOf(n.key()).tag, RemovalCause::kExpired, now,
                         removals);
            continue;
          }
          Unfile(s, i);
          if (d == kNever) continue;  // slid beyond ~73 years
          // Never back into this bucket, whatever the clocks say.
          auto b = BucketFor(s, std::max(TickOf(d), tick + 1), now);
          // Refused only once the wheel is stopping, i.e. the cache is being
          // destroyed: the entry then stays unfiled and is destroyed with the
          // cache, without a listener call (C7), never expired early.
          if (b.ok()) File(s, i, *b);
        }
        FinishLocked(s);
      }
      if (Notify(removals)) return;  // destroyed from the listener
    }
  }

  // Tells the listener of each removal, outside every lock. Returns true
  // if the cache was destroyed from inside one of those calls: the rest are
  // not told (their values die with `removals`, as ~CacheImpl destroys the
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
  // one. ~CacheImpl marks the frames of the cache it destroys, and the Notify
  // or GetOrLoad that owns one touches the cache no more.
  class UserCallFrame {
   public:
    explicit UserCallFrame(const CacheImpl* cache)
        : cache_(cache), outer_(std::exchange(user_call_frames_, this)) {}
    ~UserCallFrame() { user_call_frames_ = outer_; }
    UserCallFrame(const UserCallFrame&) = delete;
    UserCallFrame& operator=(const UserCallFrame&) = delete;

    // True once ~CacheImpl of this frame's cache has run.
    bool destroyed() const { return destroyed_; }
    // ~CacheImpl of `cache`: marks this thread's frames of it.
    static void MarkDestroyed(const CacheImpl* cache) {
      for (UserCallFrame* f = user_call_frames_; f != nullptr; f = f->outer_) {
        if (f->cache_ == cache) f->destroyed_ = true;
      }
    }

    const CacheImpl* const cache_;
    UserCallFrame* const outer_;
    bool destroyed_ = false;
  };
  static inline thread_local UserCallFrame* user_call_frames_ = nullptr;

  // The cache whose OnBucket this thread (a wheel worker) is running.
  static inline thread_local const CacheImpl* in_bucket_of_ = nullptr;

  const CacheOptions options_;
  // Null without a listener. Shared with each Notify (see there).
  const std::shared_ptr<const RemovalListener> listener_;
  Hash hash_;
  Eq eq_;
  int shard_bits_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::int64_t interval_ns_ = 1;  // the wheel's interval: a bucket's width
  const bool manual_time_ = options_.wheel.ticker != nullptr;
  std::int64_t wheel_start_ns_ = 0;  // see NowNs
  std::atomic<std::uint64_t> loads_{0}, load_failures_{0};
  LatencyRecorder load_latency_;  // GetOrLoad's load() calls
  std::atomic<std::uint64_t> listener_exceptions_{0};
  const std::shared_ptr<CacheGate> gate_ = std::make_shared<CacheGate>();
  CacheEpochs epochs_;            // Gets' read sections
  std::unique_ptr<Wheel> wheel_;  // last: stopped first, by ~CacheImpl
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_
