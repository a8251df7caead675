// A near cache in front of Redis: a local timingwheel::Cache holding copies
// of Redis strings, kept coherent by Redis's own invalidations (CLIENT
// TRACKING, RESP2: redirected to a connection subscribed to
// __redis__:invalidate).
//
// What it promises (docs/near_cache.md):
//  - a Get returns a value Redis held at some moment during the call, or
//    a local copy whose invalidation has not arrived yet: once another
//    client's write has returned and this cache has applied its
//    invalidation, the old value is never returned again;
//  - a GET whose reply races an invalidation of its key is returned to its
//    caller but not kept (the trap that would leave a copy stale forever);
//  - losing any connection (the invalidation link, a data link, Redis
//    restarting) drops every local copy, since the invalidations sent
//    meanwhile are lost: found at once when the socket closes, an idle data
//    link's within about 20 ms, a silent peer's within two heartbeats; until
//    the invalidation link is back, reads go to Redis and nothing is kept;
//  - Set and Delete write through and drop the local copy: once they return,
//    this cache's Gets see the write.
// What it does not: transactions, several Redis servers, Redis Cluster;
// values that Redis does not hold as strings (FailedPrecondition).
//
// Thread-safe. Local hits take no lock; a miss takes one of up to
// `max_links` connections and one mutex around the decision to keep its
// reply. Create() ignores SIGPIPE unless the program handles it already.
#ifndef TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_H_
#define TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "near_cache/data_links.h"
#include "near_cache/invalidation_link.h"
#include "timingwheel/cache.h"

namespace near_cache {

struct NearCacheOptions {
  std::string host = "127.0.0.1";
  int port = 6379;  // 1..65535
  // The local copies' time to live: a backstop, not the coherence mechanism.
  absl::Duration ttl = absl::Minutes(1);
  std::size_t max_entries = 100'000;             // local copies; 0 = unbounded
  absl::Duration io_timeout = absl::Seconds(1);  // connect, send, reply
  // An idle invalidation link is PINGed this often; no answer within one
  // more period counts as a lost link (a peer that vanished without a FIN).
  absl::Duration heartbeat = absl::Seconds(1);
  // Reconnection backoff of the invalidation link: doubles from min to max.
  absl::Duration reconnect_min = absl::Milliseconds(10);
  absl::Duration reconnect_max = absl::Seconds(1);
  // Broadcast mode (CLIENT TRACKING ... BCAST PREFIX p ...): invalidations
  // for every key under these prefixes, read or not; keys outside them are
  // read through and never kept. Empty: default mode, where Redis tracks
  // the keys this cache read. Prefixes must not overlap.
  std::vector<std::string> bcast_prefixes;
  int max_links = 16;  // idle data connections kept for callers, >= 1
};

struct NearCacheStats {
  std::uint64_t hits = 0;           // served from the local copy
  std::uint64_t misses = 0;         // read from Redis
  std::uint64_t kept = 0;           // misses whose reply was kept locally
  std::uint64_t refused = 0;        // replies not kept: raced an invalidation
                                    // or a flush, or no tracking at the time
  std::uint64_t invalidations = 0;  // keys invalidated by Redis
  std::uint64_t flushes = 0;        // local copies all dropped
  std::uint64_t link_losses = 0;    // connections lost (either kind)
  std::uint64_t sessions = 0;       // times the invalidation link came up
  bool tracking = false;            // invalidation link up now
  std::size_t local_entries = 0;
};

// Test-only switches that break the cache on purpose, so that the tests
// can show their checker catches each break. Only NearCacheTesting
// (near_cache_testing.h) creates a cache with them.
struct Mutants {
  bool ignore_inflight_invalidations = false;  // keep a reply that raced one
  bool no_flush_on_reconnect = false;  // keep local copies over a lost link
  // Called between a GET's reply and the decision to keep it.
  std::function<void(absl::string_view key)> before_keep;
};

class NearCache {
 public:
  // InvalidArgument for options out of range; Unavailable when Redis cannot
  // be reached within io_timeout; FailedPrecondition with Redis's words when
  // it refuses the setup (no CLIENT TRACKING before Redis 6, NOAUTH, ...).
  static absl::StatusOr<std::unique_ptr<NearCache>> Create(
      NearCacheOptions options);
  ~NearCache();

  NearCache(const NearCache&) = delete;
  NearCache& operator=(const NearCache&) = delete;

  // The value of `key`, nullopt when Redis has no such key. Unavailable when
  // Redis cannot be reached (the local copies are then dropped), and
  // FailedPrecondition when the key holds something other than a string.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);
  // Get for each key, the misses in one pipelined round trip.
  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      absl::Span<const std::string> keys);
  // SET / DEL in Redis, then the local copy dropped. Delete: whether the
  // key existed.
  absl::Status Set(absl::string_view key, absl::string_view value);
  absl::StatusOr<bool> Delete(absl::string_view key);

  // Whether a local copy of `key` is held now (no Redis call).
  bool Cached(absl::string_view key) const;
  NearCacheStats stats() const;

 private:
  friend class NearCacheTesting;
  using Local = timingwheel::Cache<std::string, std::optional<std::string>>;

  // A miss in flight: what was true when its GET went out. Its reply is
  // kept only if none of it has changed by then (see Keep).
  struct Ticket {
    std::string key;
    std::uint64_t generation = 0;
    std::uint64_t seq = 0;
    bool trackable = false;
  };
  struct Flight {
    std::uint64_t seq = 0;  // invalidations of the key while in flight
    int refs = 0;
  };

  NearCache(NearCacheOptions options, Mutants mutants);
  absl::Status Start();

  // The invalidation link's events, on its thread.
  void OnUp(std::int64_t client_id);
  void OnKeys(const std::vector<std::string>& keys);
  void OnFlushAll();
  void OnLost();

  static absl::StatusOr<std::unique_ptr<NearCache>> CreateWith(
      NearCacheOptions options, Mutants mutants);
  // Drops the local copy of `key` and refuses the replies in flight for it.
  void Drop(absl::string_view key);
  void DropLocked(const std::string& key);  // under mu_

  bool Keepable(absl::string_view key) const;
  Ticket Begin(absl::string_view key, const DataLink& link);
  // Ends the flight; keeps `value` if the ticket still holds.
  void End(const Ticket& ticket, const std::optional<std::string>* value);
  // Drops every local copy and refuses every reply in flight. Under mu_.
  void FlushLocked();
  void DataLinkLost();
  // A data link set up for the current session (tracking on), or one
  // without tracking while the invalidation link is down.
  absl::StatusOr<DataLinks::Lease> TakeLink();

  const NearCacheOptions options_;
  const Mutants mutants_;
  std::unique_ptr<Local> local_;
  DataLinks links_;
  std::unique_ptr<InvalidationLink> invalidation_;

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with
  // ThreadSanitizer, which would not see an absl::Mutex's ordering.
  mutable std::mutex mu_;
  std::uint64_t generation_ = 1;  // guarded by mu_; bumped by every flush
  std::uint64_t session_ = 0;     // guarded by mu_; 0 while down
  std::int64_t redirect_id_ = 0;  // guarded by mu_
  absl::flat_hash_map<std::string, Flight> flights_;  // guarded by mu_

  std::atomic<std::uint64_t> hits_{0}, misses_{0}, kept_{0}, refused_{0},
      invalidations_{0}, flushes_{0}, link_losses_{0}, sessions_{0};
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_H_
