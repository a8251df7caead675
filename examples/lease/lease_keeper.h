// Keeps distributed locks on Redis alive, as Redisson's watchdog does, with
// one timer per lock on a timing wheel.
//
// A lock is a Redis key holding this keeper's token, taken with
// `SET name token NX PX ttl`. While the keeper holds it, a timer renews it
// every `renew_every` (ttl / 3 by default) with a script that extends the
// key's expiry only if it still holds our token; renewals due together go
// out in pipelined batches. So:
//  - a live keeper never loses a lock to expiry, as long as a renewal gets
//    through within ttl - renew_every of the last one;
//  - a keeper that dies (or calls Abandon()) stops renewing, and each of its
//    locks expires within one ttl: a crashed holder blocks no one for long;
//  - a lock that has been taken over (its key now holds another token) is
//    never extended or deleted by this keeper: the renewal finds the token
//    changed, counts the lock lost and calls `on_lost`;
//  - when Redis cannot be reached, renewals fail, are counted and logged,
//    and are retried every `retry_after` until the lock's last known expiry
//    passes; then it is lost (the holder can no longer know it holds it).
//
// Thread-safe. `on_lost` and `log` run on the keeper's renewal thread.
// Create() ignores SIGPIPE unless the program handles it already: a write to
// a connection Redis has closed must fail, not end the process.
#ifndef TIMINGWHEEL_EXAMPLES_LEASE_LEASE_KEEPER_H_
#define TIMINGWHEEL_EXAMPLES_LEASE_LEASE_KEEPER_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lease/redis_link.h"
#include "timingwheel/timing_wheel.h"

namespace lease {

struct KeeperOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  absl::Duration ttl = absl::Seconds(30);  // a lock's lease, >= 10 ms
  // How often a held lock is renewed; zero means ttl / 3. Must be < ttl.
  absl::Duration renew_every = absl::ZeroDuration();
  // When to retry a renewal that got no answer; zero means ttl / 10.
  absl::Duration retry_after = absl::ZeroDuration();
  int batch = 512;  // renewals per pipelined round trip, >= 1
  absl::Duration tick = absl::Milliseconds(10);  // the wheel's interval
  absl::Duration io_timeout = absl::Seconds(1);  // connect, send, reply
  // Called once for each lock lost (taken over, or expired while Redis
  // could not be reached). Default: nothing.
  std::function<void(const std::string& name)> on_lost;
  // Called with a line for each failure worth an operator's eye (renewals
  // that failed, reconnects), at most about once a second. Default: stderr.
  std::function<void(const std::string& line)> log;
};

// Renewal lateness: when the renewal's reply arrived minus when it was due.
// A lock is safe while this stays below ttl - renew_every. A lost lock is
// counted in `lost` as it leaves `held` (under the same lock), so no
// snapshot misses it from both; on_lost is called for it after.
struct KeeperStats {
  std::size_t held = 0;              // locks held now
  std::uint64_t acquired = 0;        // SET NX that succeeded
  std::uint64_t refused = 0;         // SET NX that found the lock taken
  std::uint64_t released = 0;        // Release() that deleted our key
  std::uint64_t renewals = 0;        // renewals that extended a lock
  std::uint64_t renew_failures = 0;  // renewals with no answer (to retry)
  std::uint64_t lost = 0;            // locks lost (see below)
  std::uint64_t connects = 0;        // connections opened by the renewer
  timingwheel::LatencyHistogram renew_lateness;
  timingwheel::Stats wheel;
};

class LeaseKeeper {
 public:
  // InvalidArgument for options out of range; no connection is made yet.
  static absl::StatusOr<std::unique_ptr<LeaseKeeper>> Create(
      KeeperOptions options);
  ~LeaseKeeper();  // Abandon(): locks still held expire within a ttl

  // Takes the lock `name` for this keeper and starts renewing it. True if
  // taken; false if someone holds it. InvalidArgument for an empty name,
  // FailedPrecondition if this keeper holds it already or was abandoned,
  // Unavailable if Redis cannot be reached.
  absl::StatusOr<bool> Acquire(const std::string& name);
  // Acquire() for many names in pipelined batches: how many were taken.
  // On an error, the locks taken before it are held (and renewed).
  absl::StatusOr<std::size_t> AcquireMany(absl::Span<const std::string> names);

  // Stops renewing `name` and deletes its key if it still holds our token:
  // true if deleted, false if the lock had been taken over or expired.
  // NotFound if this keeper does not hold it.
  absl::StatusOr<bool> Release(const std::string& name);
  // Release() for every lock held, pipelined: how many keys were deleted.
  absl::StatusOr<std::size_t> ReleaseAll();

  // Stops renewing without releasing, as a holder that crashed: each lock
  // still held expires within one ttl of its last renewal. Idempotent.
  void Abandon();

  bool Holds(const std::string& name) const;
  KeeperStats stats() const;
  const KeeperOptions& options() const { return options_; }

 private:
  // A renewal timer's value: which lock, and when its renewal is due.
  struct Renewal {
    std::string name;
    std::int64_t due_ns = 0;
  };
  // A lock this keeper holds. The wheel is keyed by `id`, unique per
  // acquisition, so a stale timer of a released lock can never replace the
  // timer of a later acquisition of the same name.
  struct Held {
    std::uint64_t id = 0;
    std::int64_t valid_until_ns = 0;  // expiry implied by the last renewal
  };
  using Wheel = timingwheel::TimingWheel<std::uint64_t, Renewal>;
  enum class Outcome { kRenewed, kLost, kNoAnswer };
  // A batch of renewals: sent to Redis, then its replies read and applied.
  struct Flight {
    struct Item {
      std::uint64_t id;
      std::string name;
      std::string token;
      std::int64_t due_ns;
      Outcome outcome = Outcome::kNoAnswer;
    };
    std::vector<Item> items;
    std::vector<std::string> lost;  // found past their expiry before sending
    std::int64_t sent_ns = 0;
    bool sent = false;
    std::string error;  // the last failure, for the log
  };

  explicit LeaseKeeper(KeeperOptions options);

  std::string Token(std::uint64_t id) const;
  absl::Status Arm(std::uint64_t id, std::string name, absl::Duration delay);
  // The renewer thread: takes the renewals due, in batches of
  // options_.batch, Prepare()s, Send()s and Finish()es each.
  void RenewLoop();
  Flight Prepare(std::vector<std::pair<std::uint64_t, Renewal>> due);
  void Send(Flight& flight);
  void Finish(Flight& flight);
  void Log(std::string line);

  const KeeperOptions options_;
  const std::uint64_t keeper_id_;  // random: tokens differ across keepers
  std::unique_ptr<Wheel> wheel_;
  std::atomic<std::uint64_t> next_id_{1};

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Held> held_;  // guarded by mu_
  bool abandoned_ = false;                       // guarded by mu_

  // Callers' connection for Acquire and Release.
  std::mutex call_mu_;
  RedisLink call_link_;  // guarded by call_mu_

  // Renewals due, handed from the wheel's execute worker to the renewer.
  std::mutex due_mu_;
  std::condition_variable due_cv_;
  std::vector<std::pair<std::uint64_t, Renewal>> due_;  // guarded by due_mu_
  bool stopping_ = false;                               // guarded by due_mu_

  // The renewer thread's own; counters are read by stats().
  RedisLink renew_link_;
  std::string renew_sha_;
  std::int64_t last_log_ns_ = 0;
  int logs_suppressed_ = 0;
  std::atomic<std::uint64_t> acquired_{0}, refused_{0}, released_{0},
      renew_failures_{0}, lost_{0}, connects_{0};
  // A renewal and its lateness, counted together.
  mutable std::mutex lateness_mu_;
  std::uint64_t renewals_ = 0;               // guarded by lateness_mu_
  timingwheel::LatencyHistogram lateness_;  // guarded by lateness_mu_

  std::thread renewer_;
};

}  // namespace lease

#endif  // TIMINGWHEEL_EXAMPLES_LEASE_LEASE_KEEPER_H_
