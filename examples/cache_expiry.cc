// A service cache on timingwheel::Cache: user profiles from a slow backend.
//
// Request threads look users up with Zipf-skewed popularity through
// GetOrLoad, so a hot user is loaded once per time to live however many
// requests want it at once. The backend takes 0.2-1 ms and sometimes fails;
// users it does not know are remembered briefly (negative caching: Set with
// a short ttl of its own). Profile edits replace cached copies (Set), and
// some requests invalidate a user (Delete). The cache expires entries on its
// wheel and, when bounded, evicts by size; the removal listener counts what
// left and why.
//
// The program keeps its own ledger of every value it stores and checks the
// cache against it, ending with OK or FAILED: every stored value left
// through the listener exactly once or is still present, stats() counts the
// loads the backend saw, no lookup returned a value past its expiry, and
// stats().size == size() once traffic stops.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/format.h"
#include "support/memory.h"
#include "support/progress.h"
#include "timingwheel/cache.h"
#include "timingwheel/prometheus.h"

namespace {

using support::Human;
using support::MonoNanos;
using support::WithCommas;
using timingwheel::CacheStats;
using timingwheel::RemovalCause;

struct Config {
  double seconds = 10;              // how long requests run
  int threads = 8;                  // request threads (mostly waiting)
  std::int64_t qps = 20000;         // requests per second, all threads
  std::int64_t users = 100000;      // user ids 0 .. users-1
  double zipf = 1.2;                // popularity skew (> 1); higher = hotter
  std::int64_t ttl_ms = 2000;       // time to live of a profile
  bool sliding = false;             // a hit restarts the time to live
  std::int64_t max_entries = 5000;  // size bound; 0 = unbounded
  std::int64_t interval_ms = 10;    // wheel tick: expiry precision
  int fail_percent = 2;             // backend calls that fail
  int delete_percent = 1;           // requests that invalidate a user
  int edit_percent = 2;             // requests that edit a profile
};

// A cached value (a real one would carry the profile, by std::shared_ptr
// if large: Get returns a copy). Every value the program makes gets a new
// `version`, so the ledger can follow each one from its Set to the listener.
struct Profile {
  std::uint64_t version = 0;
  std::int64_t user = 0;
  bool exists = true;  // false: a cached "no such user"
};

using UserCache = timingwheel::Cache<std::int64_t, Profile>;

// The program's own account of the values in the cache. A value's record
// lives from just before it is stored until the listener reports it gone,
// so the ledger stays as big as the cache however long the program runs.
class Ledger {
 public:
  struct Totals {
    std::uint64_t stored = 0, left = 0, left_twice = 0;
    std::array<std::uint64_t, 4> by_cause{};  // indexed by RemovalCause
    std::uint64_t checked = 0, late = 0, unchecked = 0;
  };

  Ledger(std::int64_t users, bool sliding)
      : sliding_(sliding), in_flight_(users) {}

  // A new value for `user`, about to be stored with time to live `ttl`.
  // Its expiry is unknown until the call storing it returns: a lookup that
  // finds it before then is in time.
  Profile NewValue(std::int64_t user, bool exists, absl::Duration ttl) {
    std::lock_guard lock(mu_);
    records_[++last_version_] = {kUnknown, absl::ToInt64Nanoseconds(ttl)};
    return Profile{last_version_, user, exists};
  }

  // The call storing `version` returned. The cache read its clock before
  // now, so the value expires by now + ttl.
  void Stored(std::uint64_t version, bool ok) {
    std::lock_guard lock(mu_);
    if (!ok) {
      records_.erase(version);  // it never entered the cache
      return;
    }
    ++totals_.stored;
    auto it = records_.find(version);
    if (it != records_.end()) {  // else it has left already
      it->second.expires_ns = MonoNanos() + it->second.ttl_ns;
    }
  }

  // Bracket every lookup of `user`. With sliding expiry another thread's
  // hit may have restarted a value's time to live and not be recorded yet:
  // a lookup that looks late is then not conclusive.
  void Begin(std::int64_t user) { in_flight_[user].fetch_add(1); }
  void End(std::int64_t user) { in_flight_[user].fetch_sub(1); }

  // A lookup of `user` that began at `start_ns` returned `value`. Late means
  // it began after our bound on the expiry, plus 1 ms for clock rounding.
  void Returned(std::int64_t user, const Profile& value,
                std::int64_t start_ns) {
    std::lock_guard lock(mu_);
    ++totals_.checked;
    auto it = records_.find(value.version);
    if (it == records_.end()) {
      ++totals_.unchecked;  // removed while this lookup was reporting
      return;
    }
    Record& r = it->second;
    if (r.expires_ns != kUnknown && start_ns > r.expires_ns + 1'000'000) {
      ++(sliding_ && in_flight_[user].load() > 1 ? totals_.unchecked
                                                 : totals_.late);
    }
    // A hit restarts the time to live. (Also done for a waiter handed
    // another thread's load, which only loosens the bound.)
    if (sliding_ && r.expires_ns != kUnknown) {
      r.expires_ns = std::max(r.expires_ns, MonoNanos() + r.ttl_ns);
    }
  }

  // The removal listener: every stored value must come here exactly once.
  void Left(const Profile& value, RemovalCause cause) {
    std::lock_guard lock(mu_);
    ++totals_.by_cause[static_cast<int>(cause)];
    ++(records_.erase(value.version) == 1 ? totals_.left : totals_.left_twice);
  }

  Totals totals() const {
    std::lock_guard lock(mu_);
    return totals_;
  }

 private:
  static constexpr std::int64_t kUnknown = INT64_MAX;
  struct Record {
    std::int64_t expires_ns;  // a bound on its expiry, or kUnknown
    std::int64_t ttl_ns;
  };

  const bool sliding_;
  std::vector<std::atomic<int>> in_flight_;  // lookups in flight, per user
  // std::mutex, not absl::Mutex: Debian's Abseil is not built with TSan.
  mutable std::mutex mu_;
  std::uint64_t last_version_ = 0;
  absl::flat_hash_map<std::uint64_t, Record> records_;
  Totals totals_;
};

// What the request threads share.
struct Service {
  const Config& config;
  UserCache& cache;
  Ledger& ledger;
  std::atomic<std::uint64_t> loads_ok{0}, loads_failed{0};  // backend calls
};

// The backend: slow, sometimes down, and every 50th user does not exist.
absl::StatusOr<Profile> Load(Service& s, std::mt19937_64& rng,
                             std::int64_t user) {
  absl::SleepFor(absl::Microseconds(absl::Uniform(rng, 200, 1000)));
  if (absl::Uniform(rng, 0, 100) < s.config.fail_percent) {
    s.loads_failed.fetch_add(1);
    return absl::UnavailableError("backend timed out");
  }
  if (user % 50 == 49) {
    s.loads_failed.fetch_add(1);
    return absl::NotFoundError(absl::StrCat("no user ", user));
  }
  s.loads_ok.fetch_add(1);
  return s.ledger.NewValue(user, true, absl::Milliseconds(s.config.ttl_ms));
}

// Sets `value` with its own ttl, or else the cache's.
void Store(Service& s, Profile value, std::optional<absl::Duration> ttl) {
  const std::uint64_t version = value.version;
  const std::int64_t user = value.user;
  const absl::Status status = ttl ? s.cache.Set(user, std::move(value), *ttl)
                                  : s.cache.Set(user, std::move(value));
  s.ledger.Stored(version, status.ok());
}

// A read through the cache: on a miss one of the threads asking loads.
void Lookup(Service& s, std::mt19937_64& rng, std::int64_t user) {
  bool asked_backend = false;
  std::optional<std::uint64_t> loaded;  // the version our load() made
  s.ledger.Begin(user);
  const std::int64_t start = MonoNanos();
  absl::StatusOr<Profile> got =
      s.cache.GetOrLoad(user, [&]() -> absl::StatusOr<Profile> {
        asked_backend = true;
        absl::StatusOr<Profile> p = Load(s, rng, user);
        if (p.ok()) loaded = p->version;
        return p;
      });
  if (loaded) {
    s.ledger.Stored(*loaded, got.ok());
  } else if (got.ok()) {
    s.ledger.Returned(user, *got, start);  // a hit, or another's load
  }
  s.ledger.End(user);
  // An error is not cached, so without this every request for a user who
  // does not exist would go to the backend. The thread that asked
  // remembers the answer, for a quarter of the usual ttl.
  if (asked_backend && absl::IsNotFound(got.status())) {
    const absl::Duration ttl = absl::Milliseconds(s.config.ttl_ms) / 4;
    Store(s, s.ledger.NewValue(user, false, ttl), ttl);
  }
}

// A profile edit (the backend write is not simulated) replaces the cached
// copy so readers see it at once. Users not cached are left out: nobody
// read them lately, so they would only take room.
void Edit(Service& s, std::int64_t user) {
  s.ledger.Begin(user);
  const std::int64_t start = MonoNanos();
  const std::optional<Profile> cached = s.cache.Get(user);
  if (cached) s.ledger.Returned(user, *cached, start);
  s.ledger.End(user);
  if (cached && cached->exists) {
    const absl::Duration ttl = absl::Milliseconds(s.config.ttl_ms);
    Store(s, s.ledger.NewValue(user, true, ttl), std::nullopt);
  }
}

void RequestThread(Service& s, const std::atomic<bool>& stop) {
  const Config& c = s.config;
  // A std generator: absl::BitGen's seeding uses a shared pool that TSan
  // cannot see into (Debian's Abseil is not built with it).
  std::mt19937_64 rng{std::random_device{}()};
  const std::int64_t period_ns = 1'000'000'000LL * c.threads / c.qps;
  std::int64_t next = MonoNanos();
  while (!stop.load(std::memory_order_relaxed)) {
    const auto user = absl::Zipf<std::int64_t>(rng, c.users - 1, c.zipf);
    const int dice = absl::Uniform(rng, 0, 100);
    if (dice < c.delete_percent) {
      s.cache.Delete(user);  // changed elsewhere: the next lookup reloads
    } else if (dice < c.delete_percent + c.edit_percent) {
      Edit(s, user);
    } else {
      Lookup(s, rng, user);
    }
    // Paced; a thread held up by slow loads does not catch up in a burst.
    const std::int64_t now = MonoNanos();
    next = std::max(next + period_ns, now - 100'000'000);
    if (next > now) absl::SleepFor(absl::Nanoseconds(next - now));
  }
}

std::string Line(double t, const CacheStats& s, const CacheStats& prev,
                 double dt) {
  const std::uint64_t hits = s.hits - prev.hits;
  const std::uint64_t lookups = hits + s.misses - prev.misses;
  // This second's hit ratio, so the line shows the cache warming up.
  const std::string ratio =
      lookups == 0 ? "-" : absl::StrFormat("%.1f%%", 100.0 * hits / lookups);
  return absl::StrFormat(
      "%5.1fs | size %6s | hits %5s | loads %5s/s, %s failed | expired "
      "%5s/s | evicted %7s | RSS %.1f MiB",
      t, WithCommas(s.size), ratio, Human((s.loads - prev.loads) / dt),
      WithCommas(s.load_failures), Human((s.expired - prev.expired) / dt),
      WithCommas(s.evicted), support::RssBytes() / 1048576.0);
}

// Prints one check; returns whether it passed.
template <typename... Args>
bool Check(bool ok, const absl::FormatSpec<Args...>& what,
           const Args&... args) {
  absl::PrintF("  [%s] %s\n", ok ? "ok" : "FAILED",
               absl::StrFormat(what, args...));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  support::Flags flags(
      "A user-profile cache on timingwheel::Cache: Zipf-skewed read-through "
      "lookups of a slow, flaky backend, with expiry, a size bound and "
      "invalidations; checks its own accounting at the end.");
  flags.Add("seconds", &c.seconds, "how long requests run");
  flags.Add("threads", &c.threads, "request threads");
  flags.Add("qps", &c.qps, "requests per second, all threads");
  flags.Add("users", &c.users, "distinct user ids");
  flags.Add("zipf", &c.zipf, "popularity skew, > 1");
  flags.Add("ttl_ms", &c.ttl_ms, "time to live of a profile, ms");
  flags.Add("sliding", &c.sliding, "a hit restarts the time to live");
  flags.Add("max_entries", &c.max_entries, "size bound, 0 = unbounded");
  flags.Add("interval_ms", &c.interval_ms, "wheel tick (expiry precision), ms");
  flags.Add("fail_percent", &c.fail_percent,
            "percent of backend calls that fail");
  flags.Add("delete_percent", &c.delete_percent,
            "percent of requests that invalidate");
  flags.Add("edit_percent", &c.edit_percent, "percent of requests that edit");
  flags.Parse(argc, argv);
  if (c.seconds <= 0 || c.threads < 1 || c.qps < c.threads || c.users < 2 ||
      c.zipf <= 1 || c.ttl_ms < 1 || c.max_entries < 0 || c.interval_ms < 1 ||
      c.fail_percent < 0 || c.fail_percent > 100 || c.delete_percent < 0 ||
      c.edit_percent < 0 || c.delete_percent + c.edit_percent > 100) {
    absl::FPrintF(stderr, "flag out of range; see --help\n");
    return 2;
  }

  // Declared before the cache, whose listener calls it until destroyed.
  Ledger ledger(c.users, c.sliding);
  timingwheel::CacheOptions options;
  options.ttl = absl::Milliseconds(c.ttl_ms);
  options.sliding = c.sliding;
  options.max_entries = static_cast<std::size_t>(c.max_entries);
  options.wheel.interval = absl::Milliseconds(c.interval_ms);
  absl::StatusOr<std::unique_ptr<UserCache>> created = UserCache::Create(
      options, [&ledger](std::int64_t, Profile value, RemovalCause cause) {
        ledger.Left(value, cause);
      });
  if (!created.ok()) {
    absl::FPrintF(stderr, "error: %s\n", created.status().ToString());
    return 1;
  }
  std::unique_ptr<UserCache> cache = *std::move(created);
  absl::PrintF(
      "%s users (Zipf %.2f), %d threads at %s req/s for %gs; ttl %dms%s, "
      "max %s entries, tick %dms\n",
      WithCommas(c.users), c.zipf, c.threads, Human(c.qps), c.seconds, c.ttl_ms,
      c.sliding ? " sliding" : "",
      c.max_entries == 0 ? "unbounded" : WithCommas(c.max_entries),
      c.interval_ms);

  Service service{c, *cache, ledger};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < c.threads; ++i) {
    threads.emplace_back([&] { RequestThread(service, stop); });
  }

  support::ProgressLine progress;
  const std::int64_t start = MonoNanos();
  const auto elapsed = [start] { return (MonoNanos() - start) / 1e9; };
  CacheStats prev = cache->stats();
  double prev_t = 0;
  while (elapsed() < c.seconds) {
    absl::SleepFor(
        std::min(progress.period(), absl::Seconds(c.seconds - elapsed())));
    const CacheStats now = cache->stats();
    const double t = elapsed();
    progress.Show(Line(t, now, prev, t - prev_t));
    prev = now;
    prev_t = t;
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  progress.Done();

  // A quiet point: no traffic, and no removal while we read. Entries keep
  // expiring, but size() can only fall now, so two equal reads of it
  // bracket a moment between removals; by then the listener must also have
  // reported every value that left.
  CacheStats st;
  Ledger::Totals t;
  std::size_t size = 0;
  bool quiet = false;
  for (int attempt = 0; attempt < 1000 && !quiet; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Microseconds(500));
    size = cache->size();
    t = ledger.totals();
    st = cache->stats();
    quiet = cache->size() == size && t.stored == t.left + size;
  }
  // Values that left the listener's way, by cause.
  const auto left = [&t](RemovalCause c) {
    return t.by_cause[static_cast<int>(c)];
  };
  absl::PrintF("\nTraffic stopped after %.1fs\n", elapsed());
  bool ok =
      Check(quiet && t.stored == t.left + size && t.left_twice == 0,
            "every stored value left once or is present: %d stored = "
            "%d expired + %d evicted + %d replaced + %d deleted + %d "
            "present; %d left twice%s",
            t.stored, left(RemovalCause::kExpired), left(RemovalCause::kSize),
            left(RemovalCause::kReplaced), left(RemovalCause::kExplicit), size,
            t.left_twice, quiet ? "" : " (never quiet)");
  ok &= Check(left(RemovalCause::kExpired) == st.expired &&
                  left(RemovalCause::kSize) == st.evicted &&
                  left(RemovalCause::kReplaced) == st.replaced &&
                  left(RemovalCause::kExplicit) == st.deleted,
              "listener's causes match stats(): expired %d, evicted %d, "
              "replaced %d, deleted %d",
              st.expired, st.evicted, st.replaced, st.deleted);
  ok &= Check(st.load_latency.count == st.loads + st.load_failures,
              "stats() times every load: %d, p50 %s, p99 %s, max %s",
              st.load_latency.count,
              absl::FormatDuration(st.load_latency.Quantile(0.5)),
              absl::FormatDuration(st.load_latency.Quantile(0.99)),
              absl::FormatDuration(st.load_latency.max));
  ok &= Check(
      st.loads == service.loads_ok && st.load_failures == service.loads_failed,
      "stats() counts the backend's loads: %d ok, %d failed", st.loads,
      st.load_failures);
  ok &= Check(t.late == 0,
              "no lookup returned a value past its expiry: %d late of %d "
              "(%d undecided)",
              t.late, t.checked, t.unchecked);
  ok &= Check(st.size == size, "stats().size %d == size() %d", st.size, size);
  absl::PrintF(
      "\nThe cache's stats as a Prometheus /metrics endpoint would serve "
      "them:\n%s\n",
      timingwheel::PrometheusText(st, "timingwheel_cache", "cache=\"users\""));

  // Shutting down: Clear hands every remaining value to the listener, and
  // destroying the cache waits for listener calls still running on its
  // wheel. Then every value stored must have left exactly once.
  cache->Clear();
  size = cache->size();
  cache.reset();
  t = ledger.totals();
  ok &= Check(size == 0 && t.stored == t.left && t.left_twice == 0,
              "after Clear: size %d, %d stored = %d left, %d twice", size,
              t.stored, t.left, t.left_twice);
  absl::PrintF("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
