// Cache<K, V>'s implementation: routes each call to its key's shard
// (shard.h, where the entries' protocol lives), opens the read sections of
// the lock-free Gets and Sets (epoch.h), reads the clock, runs the cache's
// own TimingWheel, whose timers expire the shards' buckets, and calls the
// listener and load() with no lock held. Cache (timingwheel/cache.h)
// inherits it privately and forwards each public call; the contract is
// there.
//
// Every write ends the same way: the shard's call returns the removals it
// collected, and Notify tells the listener, which may call the cache or
// destroy it: UserCallFrame (user_call_frame.h) and CacheGate (gate.h) make
// the call that did so touch nothing after. Nothing here throws but what a
// user's type or load() throws, and then the shard is as it was (shard.h).
//
// Why over 450 lines: each public call is its routing, its read section or
// lock, its clock reading and its listener call, side by side, so that the
// order that makes destruction from a callback safe can be read in one
// place; the pieces that stand alone live beside it (shard, epochs, gate,
// flights, call frames).
#ifndef TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_
#define TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/latency_recorder.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/internal/cache/flight.h"
#include "timingwheel/internal/cache/gate.h"
#include "timingwheel/internal/cache/keys.h"
#include "timingwheel/internal/cache/schedule_point.h"
#include "timingwheel/internal/cache/shard.h"
#include "timingwheel/internal/cache/user_call_frame.h"
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
  using Keys = CacheKeys<K, Hash, Eq>;
  using Shard = CacheShard<K, V, Hash, Eq>;
  using Removals = typename Shard::Removals;
  using Read = typename Shard::Read;
  // Cache::RemovalListener and Cache::Loader (cache.h).
  using RemovalListener =
      std::function<void(K key, V value, RemovalCause cause)>;
  using Loader = std::function<absl::StatusOr<V>()>;

  CacheImpl(const CacheOptions& options, RemovalListener on_removal)
      : options_(options),
        listener_(on_removal ? std::make_shared<const RemovalListener>(
                                   std::move(on_removal))
                             : nullptr),
        shard_bits_(ShardBits(options)),
        context_{&keys_,
                 &epochs_,
                 {&CacheImpl::Arm, this},
                 std::max<std::int64_t>(
                     1, absl::ToInt64Nanoseconds(options.wheel.interval)),
                 shard_bits_,
                 options.sliding,
                 listener_ != nullptr} {
    const std::size_t n = std::size_t{1} << shard_bits_;
    shards_.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      // Shares that sum to max_entries, so the total never exceeds it.
      const std::size_t capacity =
          options.max_entries == 0
              ? 0
              : options.max_entries / n + (k < options.max_entries % n);
      shards_.push_back(std::make_unique<Shard>(
          context_, static_cast<std::uint32_t>(k), capacity));
    }
  }

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
    CallFrame::MarkDestroyed(this);
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
  static constexpr bool kDefaultStringKey = Keys::kDefaultStringKey;
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
    return s.GetLocked(key, h.tag, Clock());
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
    const std::int64_t ttl_ns = ToNs(ttl);
    Removals removals;
    if (s.MaySetWithoutLock()) {
      bool done;
      {
        CacheReadSection read(epochs_);
        done =
            read.active() && s.SetWithoutLock(key, h.tag, value, ttl_ns,
                                              Clock(), read.slot(), removals);
      }
      if (done) {
        Notify(removals);  // may have destroyed the cache: touch nothing after
        return absl::OkStatus();
      }
    }
    const absl::Status status = s.Set(std::move(key), std::move(value), h.tag,
                                      ttl_ns, Clock(), removals);
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return status;
  }

  // Cache::Delete (cache.h).
  bool Delete(const K& key) {
    const Hashed h = HashOf(key);
    Removals removals;
    const bool present =
        shards_[h.shard]->Delete(key, h.tag, Clock(), removals);
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
    typename Shard::LoadTicket ticket = s.OpenLoad(key, h.tag, Clock());
    if (ticket.hit.has_value()) return *std::move(ticket.hit);
    if (!ticket.error.ok()) return ticket.error;
    if (!ticket.leader) return ticket.flight->Wait();

    absl::StatusOr<V> result;
    bool destroyed;
    const auto load_start = std::chrono::steady_clock::now();
    {
      CallFrame frame(this);
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
      ticket.flight->Finish(result);
      return result;
    }
    load_latency_.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - load_start)
                             .count());
    (result.ok() ? loads_ : load_failures_)
        .fetch_add(1, std::memory_order_relaxed);
    Removals removals;
    try {
      // The waiters' copy before the store, so that a copy that throws
      // leaves nothing stored.
      absl::StatusOr<V> for_waiters = result;
      s.CloseLoad(key, h.tag, ToNs(options_.ttl), result, Clock(), removals);
      if (!result.ok()) for_waiters = result.status();
      ticket.flight->Finish(std::move(for_waiters));
    } catch (...) {
      // A copy of the key or value threw: the value is not cached, and no
      // caller gets it, so it needs no listener call.
      ticket.flight->Finish(
          absl::InternalError("storing the loaded value threw an exception"));
      throw;
    }
    Notify(removals);  // may have destroyed the cache: touch nothing after
    return result;
  }

  // Cache::Clear (cache.h).
  void Clear() {
    for (auto& s : shards_) {
      Removals removals;
      s->Clear(Clock(), removals);
      if (Notify(removals)) return;  // destroyed from the listener
    }
  }

  // Cache::size (cache.h).
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) n += s->size();
    return n;
  }

  // Cache::stats (cache.h).
  CacheStats stats() const {
    CacheStats st;
    for (const auto& s : shards_) s->AddStats(st);
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

  // Each shard's CheckInvariants (shard_invariants.h): the first broken
  // invariant, or OK. O(nodes); for tests and checking builds.
  absl::Status CheckInvariants() const {
    for (const auto& s : shards_) TW_RETURN_IF_ERROR(s->CheckInvariants());
    return absl::OkStatus();
  }

 private:
  friend class CacheTestPeer;

  // Wheel key: an expiry bucket (tick, shard); wheel value: the shard.
  using BucketKey = std::pair<std::int64_t, std::uint32_t>;
  using Wheel = TimingWheel<BucketKey, std::uint32_t>;

  // A key's hash, split: which shard, and the 32 bits its index keeps (and
  // the frequency sketch counts, so that a Get's record carries them).
  struct Hashed {
    std::size_t shard;
    std::uint32_t tag;
  };

  static constexpr int kMaxShardBits = 6;
  // A bounded cache keeps at least this many entries per shard, so that each
  // shard's policy has room to choose.
  static constexpr std::size_t kMinShardCapacity = 128;

  // A shard's bucket or reclaim timer on the cache's wheel
  // (CacheShardTimers).
  static absl::Status Arm(void* self, std::int64_t tick, std::uint32_t shard,
                          std::int64_t delay_ns) {
    return static_cast<CacheImpl*>(self)->wheel_->SetTimer(
        BucketKey{tick, shard}, shard, absl::Nanoseconds(delay_ns));
  }

  static int ShardBits(const CacheOptions& options) {
    if (options.max_entries == 0) return kMaxShardBits;
    int bits = 0;
    while (bits < kMaxShardBits &&
           (options.max_entries >> (bits + 1)) >= kMinShardCapacity) {
      ++bits;
    }
    return bits;
  }

  template <typename Q>
  Hashed HashOf(const Q& key) const {
    const std::uint64_t x = keys_.Mix(key);
    const Hashed h{shard_bits_ == 0 ? 0 : x >> (64 - shard_bits_),
                   static_cast<std::uint32_t>(x)};
    TW_DCHECK(h.shard < shards_.size());
    return h;
  }

  // The wheel's time (TimingWheel::Now) in ns. Under a ticker, exactly
  // that. In real time, read from the cycle counter (CycleClock): never
  // behind the steady clock, at most CycleClock::kMaxAheadNs ahead, and
  // without the serializing read of steady_clock, which would keep a Get's
  // memory accesses from overlapping the next one's. So Get never returns
  // an entry past its deadline, and may count one as expired that much
  // early.
  std::int64_t NowNs() const {
    if (manual_time_) {
      return TW_CACHE_NOW(absl::ToInt64Nanoseconds(wheel_->Now()));
    }
    return TW_CACHE_NOW(CycleClock::NanosNotBefore() - wheel_start_ns_);
  }
  // NowNs as the callable a shard reads the clock through, when it needs
  // to (an Expire that finds its bucket gone reads none).
  auto Clock() const {
    return [this] { return NowNs(); };
  }
  static std::int64_t SteadyNowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // A time to live in ns; kTtlNever for never (and for anything longer
  // than about 146 years).
  static std::int64_t ToNs(absl::Duration d) {
    if (d == absl::InfiniteDuration()) return Shard::kTtlNever;
    const std::int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates
    return std::clamp<std::int64_t>(ns, 1, Shard::kTtlNever);
  }

  // The lock-free Get: a hit's value; with `misses`, nullopt inside for a
  // miss (the key absent, or present but expired), counted; nullopt
  // outside when the caller must look again under the lock: the index
  // could not tell (an erase was shifting slots), the key was found
  // removed, this thread has no reader slot, or (without `misses`) a miss.
  template <typename Q>
  std::optional<std::optional<V>> GetShared(Shard& s, const Q& key,
                                            const Hashed& h, bool misses) {
    std::optional<std::optional<V>> out;
    std::uint32_t node;
    int reader;
    {
      CacheReadSection read(epochs_);
      if (!read.active()) return out;
      std::optional<V> value;
      switch (s.GetShared(key, h.tag, NowNs(), value, node)) {
        case Read::kGone:
          return out;
        case Read::kAbsent:
        case Read::kExpired:  // not yet removed
          if (!misses) return out;
          read.slot().Count(read.slot().misses);
          out.emplace();
          return out;
        case Read::kHit:
          break;
      }
      out.emplace(std::move(value));
      read.slot().Count(read.slot().hits);
      reader = read.index();
    }
    s.RecordHit(reader, node, h.tag);
    return out;
  }

  // The wheel's callback: bucket `tick` of shard `shard` is due (or its
  // reclaim timer). Expired in batches, with the listener called between
  // them, so the shard's lock is never held for long.
  void OnBucket(std::int64_t tick, std::uint32_t shard) {
    for (bool done = false; !done;) {
      Removals removals;
      done = shards_[shard]->Expire(tick, Clock(), removals);
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
    CallFrame frame(this);
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

  // A call into the listener or a load (user_call_frame.h).
  using CallFrame = UserCallFrame<CacheImpl>;

  // The cache whose OnBucket this thread (a wheel worker) is running.
  static inline thread_local const CacheImpl* in_bucket_of_ = nullptr;

  const CacheOptions options_;
  // Null without a listener. Shared with each Notify (see there).
  const std::shared_ptr<const RemovalListener> listener_;
  const Keys keys_{};
  const int shard_bits_;
  CacheEpochs epochs_;  // Gets' read sections
  const typename Shard::Context context_;
  std::vector<std::unique_ptr<Shard>> shards_;
  const bool manual_time_ = options_.wheel.ticker != nullptr;
  std::int64_t wheel_start_ns_ = 0;  // see NowNs
  std::atomic<std::uint64_t> loads_{0}, load_failures_{0};
  LatencyRecorder load_latency_;  // GetOrLoad's load() calls
  std::atomic<std::uint64_t> listener_exceptions_{0};
  const std::shared_ptr<CacheGate> gate_ = std::make_shared<CacheGate>();
  std::unique_ptr<Wheel> wheel_;  // last: stopped first, by ~CacheImpl
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_CACHE_IMPL_H_
