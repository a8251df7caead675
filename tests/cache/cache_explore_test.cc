// Explores thread schedules of the cache's lock-free protocol, as loom
// explores tokio's: built with TIMINGWHEEL_CACHE_EXPLORE, every atomic step
// of the protocol passes a schedule point (internal/cache/schedule_point.h)
// where the scheduler (explore/scheduler.h) picks the thread that runs
// next, so two or three threads calling the public Cache API (Get, Set in
// place without the lock, Set and Delete under it, GetOrLoad, with the
// retiring, reclaiming and growing they do) interleave step by step, over
// every schedule with at most two preemptions for the small scenarios, or
// randomized (PCT) for the three-thread one. Freed nodes are poisoned and
// released blocks quarantined (explore/poison.h), so a reader touching one
// is caught at that step. Each scenario's checks (explore/history.h, and
// its own) must hold in every schedule; and each of four mutants of the
// protocol (CacheMutant) must be caught by some scenario.
//
// This must be the only source file of its executable that includes the
// cache's headers: they compile differently under the macro.
//
// A failure prints the schedule (each thread's steps in order) and its
// choices; TW_EXPLORE_REPLAY=<scenario>:<mutant number>:<choices> replays
// one (ExploreReplay below).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "explore/heap_value.h"
#include "explore/history.h"
#include "explore/placed_hash.h"
#include "explore/poison.h"
#include "explore/scheduler.h"
#include "explore/strategies.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/internal/cache/node.h"
#include "timingwheel/internal/cache/schedule_point.h"
#include "timingwheel/ticker.h"

#ifndef TIMINGWHEEL_CACHE_EXPLORE
#error "cache_explore_test needs -DTIMINGWHEEL_CACHE_EXPLORE (meson.build)"
#endif

namespace timingwheel {

// The seam's hooks (schedule_point.h).
namespace internal {
namespace cache_explore {
namespace {
std::atomic<CacheMutant> mutant{CacheMutant::kNone};
std::atomic<std::int64_t> skew_ns[explore::kMaxThreads];
}  // namespace

void Step(const char* name, const void* touches) {
  explore::Scheduler::Instance().Step(name, touches);
}
void Spin(const char* name) { explore::Scheduler::Instance().Spin(name); }
bool Mutant(CacheMutant m) {
  return mutant.load(std::memory_order_relaxed) == m;
}
std::int64_t Now(std::int64_t ns) {
  const int t = explore::Scheduler::CurrentThread();
  return t < 0 ? ns : ns + skew_ns[t].load(std::memory_order_relaxed);
}
void Freed(void* p, std::size_t bytes) {
  std::memset(p, explore::kPoisonByte, bytes);
}
void Released(std::unique_ptr<void, void (*)(void*)>& block) {
  explore::Quarantine::Instance().Keep(block);
}
}  // namespace cache_explore
}  // namespace internal

namespace explore {
namespace {

using internal::CacheMutant;
using internal::CacheTestPeer;

// The mutants, by number (as TW_EXPLORE_REPLAY names them).
constexpr CacheMutant kMutants[] = {
    CacheMutant::kNone,
    CacheMutant::kSkipLoadsOpenCheck,
    CacheMutant::kFreeNodesOneEpochEarly,
    CacheMutant::kSkipSeqlockRecheck,
    CacheMutant::kTakeByExchange,
    CacheMutant::kReleaseBlocksOneEpochEarly,
};
const char* MutantName(CacheMutant m) {
  switch (m) {
    case CacheMutant::kNone:
      return "none";
    case CacheMutant::kSkipLoadsOpenCheck:
      return "loads_open check removed";
    case CacheMutant::kFreeNodesOneEpochEarly:
      return "retired nodes freed one epoch early";
    case CacheMutant::kSkipSeqlockRecheck:
      return "seqlock's second read removed";
    case CacheMutant::kTakeByExchange:
      return "entry taken by exchange, not compare-and-swap";
    case CacheMutant::kReleaseBlocksOneEpochEarly:
      return "retired blocks released one epoch early";
  }
  return "?";
}

// Fewer schedules under the sanitizers, whose runs are 3 to 15 times
// slower; exhaustive scenarios stay exhaustive.
#if defined(__SANITIZE_THREAD__)
constexpr int kBudgetDivisor = 8;
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kBudgetDivisor = 3;
#else
constexpr int kBudgetDivisor = 1;
#endif

// The cache's clock is a ManualTicker's that never ticks: 0, plus the
// running thread's skew. So nothing expires but by skew, and no bucket
// fires: the wheel's own threads never touch the cache's state.
constexpr absl::Duration kInterval = absl::Seconds(1);
constexpr absl::Duration kTtl = absl::Seconds(10);

// Values as the explored caches store them: the id itself (a word, stored
// in place) or a HeapValue.
template <typename V>
V ValueOf(std::uint64_t id) {
  return V(id);
}
inline std::uint64_t IdOf(std::uint64_t v) { return v; }
inline std::uint64_t IdOf(const HeapValue& v) { return v.id(); }

// The deadline a lock-free Get decided with (ReadShared's first read of
// it, in its last try), and the value the node held at that moment: with
// a word value, ReadShared's claim is that the value it returns is that
// one ("the value it read is the one that deadline belongs to",
// docs/cache_concurrency.md). Kept per managed thread while a Get is under way
// (armed); a Get that looked again under the lock is not checked.
struct DeadlineRead {
  bool armed = false;
  bool valid = false;
  bool locked = false;
  std::uint64_t value = 0;
};
DeadlineRead deadline_reads[kMaxThreads];
using WordNode = internal::CacheNode<std::uint64_t, std::uint64_t>;

// The scheduler's resume hook: freed memory touched, and the deadline
// reads of word-valued Gets.
void OnResume(int thread, const char* step, const void* touches) {
  DeadlineRead& read = deadline_reads[thread];
  if (read.armed && std::strcmp(step, "mutex.lock") == 0) read.locked = true;
  if (touches == nullptr) return;
  if (const char* what = TouchedFreed(touches)) {
    Scheduler::Instance().Fail(
        absl::StrCat("T", thread, " touched ", what, " at step ", step));
    return;
  }
  if (read.armed && std::strcmp(step, "read_shared.deadline") == 0) {
    const auto* node = static_cast<const WordNode*>(touches);
    std::memcpy(&read.value, node->value_storage, sizeof read.value);
    read.valid = true;
  }
}

template <typename V>
using ExploredCache = Cache<std::uint64_t, V, PlacedHash, CheckedEq>;

// Caches for schedules: each schedule gets a shard of its own (keys are
// placed there by PlacedHash), so one cache (whose wheel costs two thread
// starts) serves 64 schedules. Shards share only the epochs, whose values
// matter only relative to the reader slots, all clear between schedules.
template <typename V>
class CacheArena {
 public:
  struct Lease {
    ExploredCache<V>* cache;
    std::uint32_t shard;
  };
  Lease Next(History* history) {
    if (cache_ == nullptr || next_shard_ == (1u << kShardBits)) {
      cache_.reset();
      CacheOptions options;
      options.ttl = kTtl;
      options.wheel.interval = kInterval;
      options.wheel.ticker = std::make_shared<ManualTicker>();
      auto created = ExploredCache<V>::Create(
          options, [this](std::uint64_t key, V value, RemovalCause cause) {
            if (history_ != nullptr)
              history_->Listener(key, IdOf(value), cause);
          });
      EXPECT_TRUE(created.ok()) << created.status();
      cache_ = *std::move(created);
      next_shard_ = 0;
    }
    history_ = history;
    return Lease{cache_.get(), next_shard_++};
  }

 private:
  History* history_ = nullptr;
  std::unique_ptr<ExploredCache<V>> cache_;
  std::uint32_t next_shard_ = 0;
};

// One schedule's cache calls, each recorded in its history.
template <typename V>
class Run {
 public:
  Run(CacheArena<V>& arena, bool word_reads)
      : lease_(arena.Next(&history_)), word_reads_(word_reads) {}

  // Key `id` of this schedule's shard; its tag spreads keys over the index
  // unless given.
  std::uint64_t Key(std::uint32_t id) const {
    return Key(id, static_cast<std::uint32_t>(id * 0x9E3779B1u));
  }
  std::uint64_t Key(std::uint32_t id, std::uint32_t tag) const {
    return PlacedKey(lease_.shard, id, tag);
  }

  std::optional<std::uint64_t> Get(std::uint64_t key) {
    Call& call = history_.Begin(Call::Kind::kGet, Thread(), key);
    DeadlineRead* read = nullptr;
    if (word_reads_ && Thread() >= 0) {
      read = &deadline_reads[Thread()];
      *read = DeadlineRead{true};
    }
    const std::optional<V> got = cache().Get(key);
    if (got) {
      call.found = true;
      call.value = IdOf(*got);
      if (call.value == kPoisonWord) {
        Scheduler::Instance().Fail("a Get returned a poisoned (freed) value");
      }
      if (read != nullptr && read->valid && !read->locked &&
          read->value != call.value) {
        Scheduler::Instance().Fail(absl::StrCat(
            "a Get returned value ", call.value, " while its node held ",
            read->value, " when it read the deadline it decided with"));
      }
    }
    if (read != nullptr) *read = DeadlineRead{};
    history_.End(call);
    return got ? std::optional<std::uint64_t>(call.value) : std::nullopt;
  }

  void Set(std::uint64_t key, std::uint64_t id, absl::Duration ttl = kTtl) {
    Call& call = history_.Begin(Call::Kind::kSet, Thread(), key);
    call.value = id;
    const absl::Status status = cache().Set(key, ValueOf<V>(id), ttl);
    call.ok = status.ok();
    if (!status.ok()) Scheduler::Instance().Fail(status.ToString());
    history_.End(call);
  }

  bool Delete(std::uint64_t key) {
    Call& call = history_.Begin(Call::Kind::kDelete, Thread(), key);
    call.found = cache().Delete(key);
    history_.End(call);
    return call.found;
  }

  // GetOrLoad whose load() returns value `id`, with a schedule point
  // inside it, where other threads may run while the load is open.
  void GetOrLoad(std::uint64_t key, std::uint64_t id) {
    Call& call = history_.Begin(Call::Kind::kGetOrLoad, Thread(), key);
    const absl::StatusOr<V> got =
        cache().GetOrLoad(key, [&]() -> absl::StatusOr<V> {
          call.loaded = id;
          call.load_begin = history_.Now();
          Scheduler::Instance().Step("test.load", nullptr);
          call.load_end = history_.Now();
          return ValueOf<V>(id);
        });
    call.ok = got.ok();
    if (got.ok()) {
      call.found = true;
      call.value = IdOf(*got);
    }
    history_.End(call);
  }

  // After the schedule, on the main thread: the value of each key.
  std::map<std::uint64_t, std::optional<std::uint64_t>> Final() {
    std::map<std::uint64_t, std::optional<std::uint64_t>> out;
    for (const Call& c : history_.calls()) out[c.key];
    for (auto& [key, value] : out) {
      const std::optional<V> got = cache().Get(key);
      if (got) value = IdOf(*got);
    }
    return out;
  }

  absl::Status CheckShardInvariants() {
    return CacheTestPeer::CheckInvariants(cache(), lease_.shard);
  }

  History& history() { return history_; }
  ExploredCache<V>& cache() { return *lease_.cache; }

 private:
  static int Thread() { return Scheduler::CurrentThread(); }

  History history_;
  const typename CacheArena<V>::Lease lease_;
  const bool word_reads_;
};

// A scenario: what runs before the schedule (on the main thread, no
// schedule points), what each managed thread runs, and checks of its own
// besides the common ones (each Get's result, each value leaving once, the
// shard's invariants).
template <typename V>
struct Scenario {
  Scenario(std::string name, std::function<void(Run<V>&)> setup,
           std::vector<std::function<void(Run<V>&)>> threads)
      : name(std::move(name)),
        setup(std::move(setup)),
        threads(std::move(threads)) {}

  std::string name;
  std::function<void(Run<V>&)> setup;
  std::vector<std::function<void(Run<V>&)>> threads;
  std::function<std::string(
      Run<V>&, const std::map<std::uint64_t, std::optional<std::uint64_t>>&)>
      check;
  std::vector<std::int64_t> skew_ns;  // per thread; none: 0
  bool check_gets = true;
};

// How a scenario's schedules are picked.
struct Plan {
  int max_preemptions = 2;  // DFS when > 0 ...
  int pct_depth = 0;        // ... PCT of this depth when > 0
  int budget = 10'000;      // schedules at most
  std::uint64_t seed = 1;
  std::vector<int> replay;  // one schedule with these choices
};

struct Outcome {
  int schedules = 0;
  bool exhaustive = false;
  std::optional<std::string> failure;  // with its schedule
  double seconds = 0;
};

// The checks of one schedule: the first failure, or "".
template <typename V>
std::string CheckSchedule(const Scenario<V>& scenario, Run<V>& run) {
  if (auto failure = Scheduler::Instance().failure()) return *failure;
  const auto final = run.Final();
  if (auto failure = Scheduler::Instance().failure()) return *failure;
  std::string out;
  if (scenario.check_gets) out = run.history().CheckGets();
  if (out.empty()) out = run.history().CheckExactlyOnce(final);
  if (out.empty() && scenario.check) out = scenario.check(run, final);
  if (out.empty()) {
    const absl::Status st = run.CheckShardInvariants();
    if (!st.ok()) out = st.ToString();
  }
  return out;
}

template <typename V>
Outcome Explore(const Scenario<V>& scenario, const Plan& plan,
                CacheMutant mutant) {
  const auto start = std::chrono::steady_clock::now();
  Scheduler& scheduler = Scheduler::Instance();
  scheduler.set_resume_hook(&OnResume);
  internal::cache_explore::mutant.store(mutant);
  CacheArena<V> arena;
  Outcome outcome;
  const bool word_reads = std::is_same_v<V, std::uint64_t>;

  // One schedule under `strategy`; true if it failed.
  auto run_one = [&](Strategy& strategy) {
    std::string failure;
    {
      Run<V> run(arena, word_reads);
      if (scenario.setup) scenario.setup(run);
      std::vector<std::function<void()>> bodies;
      for (std::size_t t = 0; t < scenario.threads.size(); ++t) {
        internal::cache_explore::skew_ns[t].store(
            t < scenario.skew_ns.size() ? scenario.skew_ns[t] : 0);
        bodies.push_back([&run, body = scenario.threads[t]] { body(run); });
      }
      scheduler.Run(std::move(bodies), strategy);
      for (auto& skew : internal::cache_explore::skew_ns) skew.store(0);
      failure = CheckSchedule(scenario, run);
    }
    Quarantine::Instance().Clear();
    ++outcome.schedules;
    if (failure.empty()) return false;
    outcome.failure = absl::StrCat(
        failure, "\n  schedule ", outcome.schedules, " of scenario ",
        scenario.name, ", mutant: ", MutantName(mutant), "\n  steps:\n    ",
        scheduler.Trace(),
        "\n  choices: ", absl::StrJoin(scheduler.Choices(), ","));
    return true;
  };

  if (!plan.replay.empty()) {
    ReplayStrategy replay(plan.replay);
    run_one(replay);
  } else if (plan.pct_depth > 0) {
    // The first schedule (no preemption) measures how many choice points
    // a schedule has, where PCT places its priority changes.
    DfsStrategy first(0);
    if (!run_one(first)) {
      PctStrategy pct(plan.seed, plan.pct_depth,
                      static_cast<int>(scheduler.Choices().size()));
      while (outcome.schedules < plan.budget && !run_one(pct)) {
      }
    }
  } else {
    DfsStrategy dfs(plan.max_preemptions);
    bool more = true;
    while (!run_one(dfs)) {
      if (dfs.diverged()) {
        outcome.failure =
            "a replayed schedule took another path: the "
            "scenario is not deterministic";
        break;
      }
      if (outcome.schedules >= plan.budget) break;
      if (!(more = dfs.Advance())) break;
    }
    outcome.exhaustive = !more && !outcome.failure;
  }
  internal::cache_explore::mutant.store(CacheMutant::kNone);
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return outcome;
}

// Every managed thread takes its reader slot before the first schedule, so
// that the number of slots a writer scans (the registry's high water) is
// the same in every schedule, as replay needs.
void TakeReaderSlots() {
  static const bool taken = [] {
    internal::ThisThreadReaderSlot();
    std::vector<std::function<void()>> bodies(
        kMaxThreads, [] { internal::ThisThreadReaderSlot(); });
    DfsStrategy once(0);
    Scheduler::Instance().Run(std::move(bodies), once);
    return true;
  }();
  static_cast<void>(taken);
}

// ---------------------------------------------------------------------
// Scenarios. The key's first value is set before the schedule with kTtl
// (deadline 10 s at clock 0); a Set with a longer time to live moves the
// deadline later, so it goes without the lock (in place); a shorter one
// takes the lock and swaps in a new node.

// (a) Get vs Sets in place: each Get returns a value the key held during
// the call, the one its node held when it last read the deadline.
template <typename V>
Scenario<V> GetVsSetInPlace() {
  return {"get_vs_set_in_place",
          [](Run<V>& r) { r.Set(r.Key(1), 100); },
          {[](Run<V>& r) {
             r.Get(r.Key(1));
             r.Get(r.Key(1));
           },
           [](Run<V>& r) {
             r.Set(r.Key(1), 101, kTtl + absl::Seconds(1));
             r.Set(r.Key(1), 102, kTtl + absl::Seconds(2));
           }}};
}

// (a) Get vs a Set in place vs a Set and a Delete under the lock.
template <typename V>
Scenario<V> GetVsAllWriters() {
  return {"get_vs_all_writers",
          [](Run<V>& r) {
            r.Set(r.Key(1), 100);
            r.Set(r.Key(2), 200);
          },
          {[](Run<V>& r) {
             r.Get(r.Key(1));
             r.Get(r.Key(2));
             r.Get(r.Key(1));
           },
           [](Run<V>& r) {
             r.Set(r.Key(1), 101, kTtl + absl::Seconds(1));
             r.Set(r.Key(2), 201, kTtl + absl::Seconds(1));
             r.Set(r.Key(1), 102, kTtl + absl::Seconds(2));
           },
           [](Run<V>& r) {
             r.Set(r.Key(1), 103, kTtl - absl::Seconds(5));
             r.Delete(r.Key(2));
             r.Delete(r.Key(1));
           }}};
}

// (b) Get vs Delete and reclaim: the Delete's own write frees what no Get
// can read any more, then a Set of another key reuses the freed node.
template <typename V>
Scenario<V> GetVsDeleteAndReuse() {
  return {"get_vs_delete_and_reuse",
          [](Run<V>& r) { r.Set(r.Key(1), 100); },
          {[](Run<V>& r) { r.Get(r.Key(1)); },
           [](Run<V>& r) {
             r.Delete(r.Key(1));
             r.Set(r.Key(2), 200);
           }}};
}

// (e) A Set in place vs Set and Delete under the lock: each value leaves
// exactly once.
template <typename V>
Scenario<V> SetInPlaceVsLockedWriters() {
  return {"set_in_place_vs_locked_writers",
          [](Run<V>& r) { r.Set(r.Key(1), 100); },
          {[](Run<V>& r) { r.Set(r.Key(1), 101, kTtl + absl::Seconds(1)); },
           [](Run<V>& r) {
             r.Set(r.Key(1), 102, kTtl - absl::Seconds(5));
             r.Delete(r.Key(1));
           }}};
}

// (e) Two Sets in place of one key: each value leaves exactly once.
template <typename V>
Scenario<V> TwoSetsInPlace() {
  return {"two_sets_in_place",
          [](Run<V>& r) { r.Set(r.Key(1), 100); },
          {[](Run<V>& r) { r.Set(r.Key(1), 101, kTtl + absl::Seconds(1)); },
           [](Run<V>& r) { r.Set(r.Key(1), 102, kTtl + absl::Seconds(2)); }}};
}

// (d) GetOrLoad vs a Set without the lock, the GetOrLoad's clock a whole
// time to live ahead (the cycle clock runs ahead on one core): it finds
// the key expired and loads, while the Set, on time, finds it present. A
// Set made entirely while load() runs must supersede the load: its value
// stays, and the loaded one goes to the listener as replaced.
template <typename V>
Scenario<V> GetOrLoadVsSet() {
  Scenario<V> s{
      "get_or_load_vs_set",
      [](Run<V>& r) { r.Set(r.Key(1), 100); },
      {[](Run<V>& r) { r.GetOrLoad(r.Key(1), 900); },
       [](Run<V>& r) { r.Set(r.Key(1), 101, kTtl + absl::Seconds(5)); }}};
  s.skew_ns = {absl::ToInt64Nanoseconds(kTtl), 0};
  s.check_gets = false;  // clocks differ: "held during the call" is moot
  s.check = [](Run<V>& r, const auto& final) -> std::string {
    for (const Call& load : r.history().calls()) {
      if (!load.loaded) continue;
      for (const Call& set : r.history().calls()) {
        if (set.kind != Call::Kind::kSet || set.begin < load.load_begin ||
            set.end > load.load_end) {
          continue;
        }
        const auto f = final.find(load.key);
        if (f != final.end() && f->second == load.loaded) {
          return absl::StrCat("the Set of ", set.value,
                              " ran while load() ran, yet the loaded value ",
                              *load.loaded, " was stored over it");
        }
        for (const Heard& h : r.history().heard()) {
          if (h.value == *load.loaded && h.cause != RemovalCause::kReplaced) {
            return absl::StrCat("the load superseded by the Set of ", set.value,
                                " was heard with cause ",
                                static_cast<int>(h.cause), ", not kReplaced");
          }
        }
      }
    }
    return "";
  };
  return s;
}

// (c) Get vs an insert that grows the index: the 13th key of a 16-slot
// table publishes a 24-slot one and retires the old.
template <typename V>
Scenario<V> GetVsIndexGrowth() {
  return {"get_vs_index_growth",
          [](Run<V>& r) {
            for (std::uint32_t k = 1; k <= 12; ++k) r.Set(r.Key(k), 100 + k);
          },
          {[](Run<V>& r) {
             r.Get(r.Key(1));
             r.Get(r.Key(12));
           },
           [](Run<V>& r) { r.Set(r.Key(13), 113); }}};
}

// (c) Get vs a Delete that shrinks the index (3 keys left of 13 in 24
// slots; the delete of one more leaves it under 1/8 full).
template <typename V>
Scenario<V> GetVsIndexShrink() {
  return {"get_vs_index_shrink",
          [](Run<V>& r) {
            for (std::uint32_t k = 1; k <= 13; ++k) r.Set(r.Key(k), 100 + k);
            for (std::uint32_t k = 4; k <= 13; ++k) r.Delete(r.Key(k));
          },
          {[](Run<V>& r) {
             r.Get(r.Key(1));
             r.Get(r.Key(2));
           },
           [](Run<V>& r) { r.Delete(r.Key(3)); }}};
}

// (c) Get vs an insert that grows the pool's chunk directory: 4096 nodes
// fill its 16 chunks; the next one adds a chunk and a directory of 32. The
// keys never expire, so no bucket sentinel takes a node.
template <typename V>
Scenario<V> GetVsDirectoryGrowth() {
  return {"get_vs_directory_growth",
          [](Run<V>& r) {
            for (std::uint32_t k = 1; k <= 4096; ++k) {
              r.Set(r.Key(k), 100'000 + k, absl::InfiniteDuration());
            }
          },
          {[](Run<V>& r) { r.Get(r.Key(1)); },
           [](Run<V>& r) {
             r.Set(r.Key(5000), 105'000, absl::InfiniteDuration());
           }}};
}

// (c) Get vs the Delete that empties a shard of over one chunk of nodes,
// whose next write gives the chunks and their directory back.
template <typename V>
Scenario<V> GetVsShardRelease() {
  return {"get_vs_shard_release",
          [](Run<V>& r) {
            for (std::uint32_t k = 1; k <= 257; ++k) {
              r.Set(r.Key(k), 1000 + k, absl::InfiniteDuration());
            }
            for (std::uint32_t k = 2; k <= 257; ++k) r.Delete(r.Key(k));
          },
          {[](Run<V>& r) {
             r.Get(r.Key(1));
             r.Get(r.Key(1));
           },
           [](Run<V>& r) {
             r.Delete(r.Key(1));
             r.Delete(r.Key(2));
           }}};
}

// ---------------------------------------------------------------------

struct Named {
  std::string name;
  std::function<Outcome(const Plan&, CacheMutant)> explore;
  Plan plan;
};

template <typename V>
Named Make(Scenario<V> scenario, Plan plan) {
  std::string name = scenario.name;
  if (!std::is_same_v<V, std::uint64_t>) name += "_heap";
  plan.budget = std::max(1, plan.budget / kBudgetDivisor);
  return {name,
          [scenario = std::move(scenario)](const Plan& p, CacheMutant m) {
            return Explore(scenario, p, m);
          },
          plan};
}

Plan Dfs(int max_preemptions, int budget) {
  Plan p;
  p.max_preemptions = max_preemptions;
  p.budget = budget;
  return p;
}
Plan Pct(int depth, int budget) {
  Plan p;
  p.pct_depth = depth;
  p.budget = budget;
  return p;
}

std::vector<Named> Scenarios() {
  using Heap = HeapValue;
  using Word = std::uint64_t;
  return {
      Make(GetVsSetInPlace<Word>(), Dfs(2, 4000)),
      Make(GetVsDeleteAndReuse<Word>(), Dfs(2, 4000)),
      Make(GetVsDeleteAndReuse<Heap>(), Dfs(2, 4000)),
      Make(SetInPlaceVsLockedWriters<Word>(), Dfs(2, 4000)),
      Make(TwoSetsInPlace<Word>(), Dfs(2, 4000)),
      Make(GetOrLoadVsSet<Word>(), Dfs(2, 4000)),
      Make(GetVsIndexGrowth<Word>(), Dfs(2, 4000)),
      Make(GetVsIndexShrink<Word>(), Dfs(2, 4000)),
      Make(GetVsShardRelease<Word>(), Dfs(2, 4000)),
      Make(GetVsDirectoryGrowth<Word>(), Dfs(1, 200)),
      Make(GetVsAllWriters<Word>(), Pct(3, 3000)),
      Make(GetVsAllWriters<Heap>(), Pct(3, 1500)),
  };
}

class CacheExplore : public ::testing::Test {
 protected:
  void SetUp() override { TakeReaderSlots(); }
};

TEST_F(CacheExplore, PlacedHashUndoesTheCachesMix) {
  for (const std::uint64_t x : std::vector<std::uint64_t>{
           0, 1, 42, kPoisonWord, ~std::uint64_t{0}, 0x0123456789ABCDEFULL}) {
    EXPECT_EQ(internal::MixHash(UnmixHash(x)), x);
  }
}

// Every scenario passes every schedule explored, with the protocol intact.
TEST_F(CacheExplore, EveryScheduleKeepsTheProtocol) {
  int total = 0;
  for (const Named& s : Scenarios()) {
    const Outcome o = s.explore(s.plan, CacheMutant::kNone);
    total += o.schedules;
    std::printf("  %-34s %6d schedules%s, %.2f s\n", s.name.c_str(),
                o.schedules, o.exhaustive ? " (all)" : "", o.seconds);
    EXPECT_FALSE(o.failure.has_value()) << *o.failure;
  }
  std::printf("  %d schedules in all\n", total);
}

// Each mutant of the protocol fails some scenario within its budget. With
// TW_EXPLORE_EVERY_SCENARIO set, every scenario is run against every
// mutant (which catch which), not only up to the first that catches it.
TEST_F(CacheExplore, EveryMutantIsCaught) {
  const std::vector<Named> scenarios = Scenarios();
  const bool every = std::getenv("TW_EXPLORE_EVERY_SCENARIO") != nullptr;
  for (const CacheMutant mutant : kMutants) {
    if (mutant == CacheMutant::kNone) continue;
    bool caught = false;
    for (const Named& s : scenarios) {
      const Outcome o = s.explore(s.plan, mutant);
      if (every) {
        std::printf("  %-46s %-34s %s after %d schedule(s)\n",
                    MutantName(mutant), s.name.c_str(),
                    o.failure ? "CAUGHT" : "passes", o.schedules);
        if (o.failure) {
          std::printf("      %s\n",
                      o.failure->substr(0, o.failure->find('\n')).c_str());
        }
        caught = caught || o.failure.has_value();
        continue;
      }
      if (!o.failure) continue;
      caught = true;
      std::printf("  %s: caught by %s after %d schedule(s):\n  %s\n",
                  MutantName(mutant), s.name.c_str(), o.schedules,
                  o.failure->c_str());
      break;
    }
    EXPECT_TRUE(caught) << "no scenario catches the mutant: "
                        << MutantName(mutant);
  }
}

// TW_EXPLORE_REPLAY=<scenario>:<mutant number>:<choices, comma-separated>
// runs that one schedule and prints it.
TEST_F(CacheExplore, Replay) {
  const char* spec = std::getenv("TW_EXPLORE_REPLAY");
  if (spec == nullptr) GTEST_SKIP() << "TW_EXPLORE_REPLAY not set";
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  ASSERT_EQ(parts.size(), 3u) << spec;
  Plan plan;
  for (const auto& c : absl::StrSplit(parts[2], ',')) {
    plan.replay.push_back(std::atoi(std::string(c).c_str()));
  }
  const CacheMutant mutant = kMutants[std::atoi(parts[1].c_str())];
  for (const Named& s : Scenarios()) {
    if (s.name != parts[0]) continue;
    const Outcome o = s.explore(plan, mutant);
    if (o.failure) {
      std::printf("%s\n", o.failure->c_str());
    } else {
      std::printf("no failure; steps:\n    %s\n",
                  Scheduler::Instance().Trace().c_str());
    }
    return;
  }
  FAIL() << "no scenario " << parts[0];
}

}  // namespace
}  // namespace explore
}  // namespace timingwheel
