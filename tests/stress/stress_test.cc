// docs/api.md S6 (and S8, S9, S10, the max_pending and stopped-wheel rows of
// Errors, E2's stats after Stop) under concurrency, with the real ticker:
// several producer threads hammer one wheel with SetTimer/MoveTimer/RemoveTimer
// while Stop, Drain, destruction, throwing, re-arming and blocking callbacks
// race them. Every value is globally unique and reports how it ended; the
// verifier then checks that each accepted value ended exactly one way, in a way
// its key's history allows, and that nothing fired before its deadline.
//
// Sizes are modest (thousands of operations) so that each test finishes in a
// few seconds under ThreadSanitizer on two shared cores.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/concurrency_barrier.h"
#include "../common/hang_guard.h"
#include "../common/steady_now.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace {

using ::absl::StatusCode;
using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::ConcurrencyBarrier;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::NowNs;

// How a value left the wheel.
enum class End : std::uint8_t {
  kNone = 0,
  kFired,      // handed to execute
  kDrained,    // handed to a Drain fn
  kStopped,    // returned by Stop
  kDestroyed,  // destroyed inside the library: removed, superseded, refused
               // by a failing call, or dropped by the destructor
};

const char* Name(End e) {
  switch (e) {
    case End::kNone:
      return "none";
    case End::kFired:
      return "fired";
    case End::kDrained:
      return "drained";
    case End::kStopped:
      return "stopped";
    case End::kDestroyed:
      return "destroyed";
  }
  return "?";
}

// One slot per value id: how it ended and, if fired, when.
class Ledger {
 public:
  static constexpr std::size_t kCapacity = 1 << 18;

  Ledger()
      : ends_(new std::atomic<std::uint8_t>[kCapacity]),
        fire_ns_(new std::atomic<std::int64_t>[kCapacity]) {
    for (std::size_t i = 0; i < kCapacity; ++i) {
      ends_[i].store(0, std::memory_order_relaxed);
      fire_ns_[i].store(0, std::memory_order_relaxed);
    }
  }

  std::uint64_t NewId() {
    const std::uint64_t id = next_.fetch_add(1);
    if (id >= kCapacity) {
      ADD_FAILURE() << "Ledger too small";
      std::abort();
    }
    return id;
  }

  // Records the first end of `id`; a second one is a duplicate.
  void Record(std::uint64_t id, End how) {
    std::uint8_t expected = 0;
    if (!ends_[id].compare_exchange_strong(expected,
                                           static_cast<std::uint8_t>(how))) {
      duplicates_.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu_);
      if (duplicate_examples_.size() < 10) {
        duplicate_examples_.push_back(absl::StrCat(
            "value ", id, " ended as ", Name(static_cast<End>(expected)),
            " and as ", Name(how)));
      }
    }
  }
  void RecordFireTime(std::uint64_t id, std::int64_t ns) {
    fire_ns_[id].store(ns, std::memory_order_relaxed);
  }
  void CountEmptyDelivery() { empty_deliveries_.fetch_add(1); }

  End end(std::uint64_t id) const {
    return static_cast<End>(ends_[id].load(std::memory_order_relaxed));
  }
  std::int64_t fire_ns(std::uint64_t id) const {
    return fire_ns_[id].load(std::memory_order_relaxed);
  }
  int duplicates() const { return duplicates_.load(); }
  int empty_deliveries() const { return empty_deliveries_.load(); }
  std::vector<std::string> duplicate_examples() {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicate_examples_;
  }

 private:
  std::unique_ptr<std::atomic<std::uint8_t>[]> ends_;
  std::unique_ptr<std::atomic<std::int64_t>[]> fire_ns_;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<int> duplicates_{0};
  std::atomic<int> empty_deliveries_{0};
  std::mutex mu_;
  std::vector<std::string> duplicate_examples_;
};

// The wheel's value type: move-only, and reports its own destruction unless
// the test took it (so a value destroyed inside the library is noticed, and
// one destroyed twice is a duplicate).
class Tracked {
 public:
  Tracked(std::uint64_t id, Ledger* ledger) : id_(id), ledger_(ledger) {}
  Tracked(Tracked&& other) noexcept
      : id_(other.id_), ledger_(std::exchange(other.ledger_, nullptr)) {}
  Tracked& operator=(Tracked&& other) noexcept {
    if (this != &other) {
      Drop();
      id_ = other.id_;
      ledger_ = std::exchange(other.ledger_, nullptr);
    }
    return *this;
  }
  ~Tracked() { Drop(); }

  // The test received this value: it ended as `how`. Returns its id, or
  // nullopt-like ~0 for a moved-from shell (which the library must never
  // hand out).
  std::uint64_t Take(End how, Ledger& ledger) {
    if (ledger_ == nullptr) {
      ledger.CountEmptyDelivery();
      return ~std::uint64_t{0};
    }
    ledger_->Record(id_, how);
    ledger_ = nullptr;
    return id_;
  }

 private:
  void Drop() {
    if (ledger_ != nullptr) ledger_->Record(id_, End::kDestroyed);
    ledger_ = nullptr;
  }

  std::uint64_t id_;
  Ledger* ledger_;
};

using Wheel = TimingWheel<int, Tracked>;

// One call on a key, as the caller saw it.
struct Op {
  enum Kind : std::uint8_t { kSet, kMove, kRemove };
  Kind kind;
  std::uint64_t id = 0;                    // kSet: the value's id
  std::int64_t start_ns = 0;               // clock read just before the call
  std::int64_t deadline_ns = 0;            // kSet, kMove: start_ns + delay
  StatusCode code = StatusCode::kUnknown;  // what the call returned
};

// A key's calls in submission order. Calls on one key are causally ordered
// (one producer thread, or a chain of callbacks), so appending before the
// call keeps the log in the order the wheel applies them (docs/api.md S9).
struct KeyLog {
  std::mutex mu;
  std::deque<Op> ops;
};

struct Outcomes {
  int accepted = 0, refused = 0;
  int fired = 0, drained = 0, stopped = 0, destroyed = 0;
  // Of the destroyed: by a later Set of the key, by a RemoveTimer.
  int superseded = 0, removed = 0;
};

// A wheel of Tracked values over keys 0..num_keys-1, with a log per key.
class Harness {
 public:
  // Runs on the execute worker after the value was recorded as fired.
  using Behaviour = std::function<void(Harness& h, int key, std::uint64_t id)>;

  Harness(int num_keys, const Options& options, Behaviour behaviour = nullptr)
      : behaviour_(std::move(behaviour)) {
    logs_.reserve(num_keys);
    for (int k = 0; k < num_keys; ++k)
      logs_.push_back(std::make_unique<KeyLog>());
    auto wheel = Wheel::Create(options, [this](int key, Tracked value) {
      const std::int64_t now = NowNs();
      if (wheel_gone_.load()) late_callbacks_.fetch_add(1);
      const std::uint64_t id = value.Take(End::kFired, ledger_);
      if (id == ~std::uint64_t{0}) return;
      ledger_.RecordFireTime(id, now);
      if (behaviour_) behaviour_(*this, key, id);
    });
    EXPECT_TRUE(wheel.ok()) << wheel.status();
    wheel_ = std::move(*wheel);
  }

  Wheel& wheel() { return *wheel_; }
  Ledger& ledger() { return ledger_; }

  StatusCode Set(int key, absl::Duration delay) {
    const std::uint64_t id = ledger_.NewId();
    return Call(key, Op{Op::kSet, id, 0, 0}, delay, [&] {
      return wheel_->SetTimer(key, Tracked(id, &ledger_), delay);
    });
  }
  StatusCode Move(int key, absl::Duration delay) {
    return Call(key, Op{Op::kMove}, delay,
                [&] { return wheel_->MoveTimer(key, delay); });
  }
  StatusCode Remove(int key) {
    return Call(key, Op{Op::kRemove}, absl::ZeroDuration(),
                [&] { return wheel_->RemoveTimer(key); });
  }
  absl::Status Drain() {
    return wheel_->Drain(
        [this](int, Tracked value) { value.Take(End::kDrained, ledger_); });
  }
  // Stops the wheel, recording what Stop returned.
  absl::Status Stop() {
    auto stopped = wheel_->Stop();
    stop_returned_.store(true);
    if (!stopped.ok()) return stopped.status();
    for (auto& [key, value] : *stopped) value.Take(End::kStopped, ledger_);
    return absl::OkStatus();
  }
  // Destroys the wheel without Stop; values left are destroyed by it.
  void Destroy() {
    wheel_.reset();
    wheel_gone_.store(true);
  }
  bool stop_returned() const { return stop_returned_.load(); }

  // Checks every logged call. `destroy_ends_last` allows the last value of a
  // key to end destroyed (the wheel was destroyed, not stopped).
  Outcomes Verify(bool destroy_ends_last = false) {
    Outcomes o;
    int lost = 0, early = 0, bad_destroy = 0, bad_stop = 0, refused_kept = 0;
    std::vector<std::string> examples;
    auto note = [&](std::string s) {
      if (examples.size() < 10) examples.push_back(std::move(s));
    };
    for (std::size_t key = 0; key < logs_.size(); ++key) {
      std::lock_guard<std::mutex> lock(logs_[key]->mu);
      const std::deque<Op>& ops = logs_[key]->ops;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        if (op.kind != Op::kSet) continue;
        const End end = ledger_.end(op.id);
        if (op.code != StatusCode::kOk) {
          ++o.refused;
          if (end != End::kDestroyed) {
            ++refused_kept;
            note(
                absl::StrCat("refused value ", op.id, " ended as ", Name(end)));
          }
          continue;
        }
        ++o.accepted;
        // The next accepted Set or Remove of the key ends this value unless
        // it fired (or was drained) first.
        std::size_t j = i + 1;
        while (j < ops.size() &&
               !(ops[j].code == StatusCode::kOk && ops[j].kind != Op::kMove)) {
          ++j;
        }
        const bool followed = j < ops.size();
        switch (end) {
          case End::kNone:
            ++lost;
            note(absl::StrCat("value ", op.id, " of key ", key, " was lost"));
            break;
          case End::kFired: {
            ++o.fired;
            // The deadline in force when it fired was set by the last applied
            // Set/Move among ops[i, j) that started before the fire; the
            // smallest of their deadlines is a sound lower bound.
            const std::int64_t t = ledger_.fire_ns(op.id);
            std::int64_t bound = op.deadline_ns;
            for (std::size_t m = i + 1; m < j; ++m) {
              if (ops[m].code == StatusCode::kOk && ops[m].start_ns < t) {
                bound = std::min(bound, ops[m].deadline_ns);
              }
            }
            if (t < bound || t <= op.start_ns) {
              ++early;
              note(absl::StrCat("value ", op.id, " of key ", key, " fired ",
                                (bound - t) / 1000.0, " us early"));
            }
            break;
          }
          case End::kDrained:
            ++o.drained;
            break;
          case End::kStopped:
            ++o.stopped;
            if (followed) {
              ++bad_stop;
              note(absl::StrCat("Stop returned value ", op.id, " of key ", key,
                                " after a later Set/Remove was accepted"));
            }
            break;
          case End::kDestroyed:
            ++o.destroyed;
            if (followed) {
              ++(ops[j].kind == Op::kSet ? o.superseded : o.removed);
            } else if (!destroy_ends_last) {
              ++bad_destroy;
              note(absl::StrCat("value ", op.id, " of key ", key,
                                " destroyed though never removed or "
                                "superseded"));
            }
            break;
        }
      }
    }
    EXPECT_EQ(lost, 0);
    EXPECT_EQ(early, 0);
    EXPECT_EQ(bad_destroy, 0);
    EXPECT_EQ(bad_stop, 0);
    EXPECT_EQ(refused_kept, 0);
    EXPECT_EQ(ledger_.duplicates(), 0);
    EXPECT_EQ(ledger_.empty_deliveries(), 0);
    EXPECT_EQ(late_callbacks_.load(), 0) << "callbacks ran after Stop/destroy";
    for (const std::string& s : examples) ADD_FAILURE() << s;
    for (const std::string& s : ledger_.duplicate_examples())
      ADD_FAILURE() << s;
    return o;
  }

  // For a stopped wheel: its counters agree with the ledger.
  void VerifyStats(const Outcomes& o) {
    const Stats s = wheel_->stats();
    EXPECT_EQ(s.fired, static_cast<std::uint64_t>(o.fired));
    EXPECT_EQ(s.drained, static_cast<std::uint64_t>(o.drained));
    EXPECT_EQ(s.superseded, static_cast<std::uint64_t>(o.superseded));
    EXPECT_EQ(s.removed, static_cast<std::uint64_t>(o.removed));
    EXPECT_EQ(o.superseded + o.removed, o.destroyed);
    EXPECT_EQ(s.pending, 0u);
  }

  // Lets callbacks flag that they ran after the wheel was stopped.
  void MarkStoppedForCallbacks() { wheel_gone_.store(true); }

 private:
  template <typename Fn>
  StatusCode Call(int key, Op op, absl::Duration delay, Fn fn) {
    KeyLog& log = *logs_.at(key);
    std::size_t index;
    {
      std::lock_guard<std::mutex> lock(log.mu);
      op.start_ns = NowNs();
      op.deadline_ns = op.start_ns + absl::ToInt64Nanoseconds(delay);
      index = log.ops.size();
      log.ops.push_back(op);
    }
    const StatusCode code = fn().code();
    std::lock_guard<std::mutex> lock(log.mu);
    log.ops[index].code = code;
    return code;
  }

  Ledger ledger_;
  std::vector<std::unique_ptr<KeyLog>> logs_;
  Behaviour behaviour_;
  std::atomic<bool> stop_returned_{false};
  std::atomic<bool> wheel_gone_{false};
  std::atomic<int> late_callbacks_{0};
  std::unique_ptr<Wheel> wheel_;  // last: destroyed first
};

constexpr int kProducers = 4;
constexpr int kKeysPerProducer = 64;

Options StressOptions(int execute_workers = 2) {
  Options options;
  options.interval = absl::Milliseconds(1);
  options.num_slots = 8;  // 8 ms rotations: most delays take circles
  options.execute_workers = execute_workers;
  options.drain_workers = 3;
  return options;
}

// What a producer accepts as a call's result.
struct Allowed {
  bool failed_precondition = false;  // the wheel may be stopped meanwhile
  bool resource_exhausted = false;   // max_pending is set
};

// Random Set/Move/Remove on the producer's own keys, with delays from 0.1 to
// 12 ms (up to 1.5 rotations of the 8-slot wheel). Returns how many calls were
// refused with FailedPrecondition; once one is, every later call must be too (a
// stopped wheel stays stopped).
int Produce(Harness& h, int producer, int ops, Allowed allowed,
            bool pause = true) {
  std::mt19937 rng(1000 + producer);
  const int base = producer * kKeysPerProducer;
  int refused = 0;
  for (int n = 0; n < ops; ++n) {
    const int key = base + static_cast<int>(rng() % kKeysPerProducer);
    const absl::Duration delay = absl::Microseconds(100 + rng() % 12000);
    const unsigned r = rng() % 100;
    StatusCode code;
    if (r < 45) {
      code = h.Set(key, delay);
    } else if (r < 80) {
      code = h.Move(key, delay);
    } else {
      code = h.Remove(key);
    }
    if (code == StatusCode::kFailedPrecondition &&
        allowed.failed_precondition) {
      ++refused;
    } else if (code == StatusCode::kResourceExhausted &&
               allowed.resource_exhausted) {
    } else {
      EXPECT_EQ(code, StatusCode::kOk);
      EXPECT_EQ(refused, 0) << "a call succeeded after one was refused as "
                               "stopped";
    }
    // Let ticks pass between bursts so fires interleave with the calls.
    if (pause && n % 8 == 7) absl::SleepFor(absl::Microseconds(300));
  }
  return refused;
}

void RunProducers(Harness& h, int ops, Allowed allowed, bool pause = true) {
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back(
        [&h, p, ops, allowed, pause] { Produce(h, p, ops, allowed, pause); });
  }
  for (std::thread& t : threads) t.join();
}

// Waits until the wheel has nothing pending (all short timers fired).
void WaitUntilEmpty(Harness& h) {
  BecomesTrue([&] { return h.wheel().stats().pending == 0; });
}

// Waits until nothing is pending, stops the wheel, and checks every logged
// call, and the stats, against the ledger.
Outcomes StopWhenEmptyAndVerify(Harness& h) {
  WaitUntilEmpty(h);
  EXPECT_TRUE(h.Stop().ok());
  h.MarkStoppedForCallbacks();
  const Outcomes o = h.Verify();
  h.VerifyStats(o);
  return o;
}

TEST(Stress, MixedOpsEndExactlyOnce) {
  Harness h(kProducers * kKeysPerProducer, StressOptions());
  RunProducers(h, 2000, Allowed{});
  const Outcomes o = StopWhenEmptyAndVerify(h);
  EXPECT_GT(o.fired, 0);
  EXPECT_GT(o.destroyed, 0);
  RecordProperty("accepted", o.accepted);
  RecordProperty("fired", o.fired);
}

// Tens of thousands of distinct keys, set as fast as two threads can, with
// moves and removes of keys set before and delays short enough that timers
// fire during the fill: the key index grows several times in steps (started
// early by the loop when the sets come fast enough, and stepped between its
// rounds), with lookups across two tables meanwhile, and every value still
// ends exactly one way.
TEST(Stress, IndexGrowthDuringAFastFillEndsExactlyOnce) {
  constexpr int kThreads = 2, kPerThread = 20000;
  Harness h(kThreads * kPerThread, StressOptions());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&h, t] {
      std::mt19937 rng(77 + t);
      const int base = t * kPerThread;
      auto delay = [&rng] { return absl::Microseconds(1000 + rng() % 100000); };
      for (int i = 0; i < kPerThread; ++i) {
        EXPECT_EQ(h.Set(base + i, delay()), StatusCode::kOk);
        if (i % 4 != 3) continue;
        const int earlier = base + static_cast<int>(rng() % (i + 1));
        if (rng() % 2 == 0) {
          EXPECT_EQ(h.Move(earlier, delay()), StatusCode::kOk);
        } else {
          EXPECT_EQ(h.Remove(earlier), StatusCode::kOk);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const Outcomes o = StopWhenEmptyAndVerify(h);
  EXPECT_EQ(o.accepted, kThreads * kPerThread);
  EXPECT_GT(o.fired, kThreads * kPerThread / 2);
  EXPECT_GT(o.removed, 0);
}

// Stop racing producers: every call is either accepted and accounted or
// refused. A shutdown of the workers that overtook callbacks still queued
// would show here as calls lost, in some runs only; the test
// S8Stop.RunsEveryQueuedCallbackBeforeReturning (tests/contract/stop_test.cc)
// checks the same rule with a fixed interleaving.
TEST(Stress, StopRacingProducers) {
  Harness h(kProducers * kKeysPerProducer, StressOptions());
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&h, &refused, p] {
      refused.fetch_add(
          Produce(h, p, 3000, Allowed{.failed_precondition = true}));
    });
  }
  // Stop in mid-production: once the loop has applied a good share of the
  // calls (not after a fixed sleep, which a slow machine could outlast).
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (h.wheel().stats().applied < kProducers * 3000 / 4 &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Microseconds(200));
  }
  ASSERT_TRUE(h.Stop().ok());
  h.MarkStoppedForCallbacks();
  for (std::thread& t : threads) t.join();
  // A second Stop is empty, and calls after it are refused.
  auto again = h.wheel().Stop();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  const Outcomes o = h.Verify();
  h.VerifyStats(o);
  EXPECT_GT(o.stopped + o.fired, 0);
  RecordProperty("refused", refused.load());
  RecordProperty("stopped", o.stopped);
}

TEST(Stress, DestructionWithoutStopDestroysEachValueOnce) {
  auto h =
      std::make_unique<Harness>(kProducers * kKeysPerProducer, StressOptions(),
                                [](Harness&, int, std::uint64_t id) {
                                  // Some callbacks still running while the
                                  // wheel is destroyed.
                                  if (id % 13 == 0)
                                    absl::SleepFor(absl::Milliseconds(1));
                                });
  RunProducers(*h, 1500, Allowed{});
  // Plenty still pending: the last calls' timers are up to 12 ms out.
  h->Destroy();
  const Outcomes o = h->Verify(/*destroy_ends_last=*/true);
  EXPECT_GT(o.destroyed, 0);
  EXPECT_EQ(o.stopped, 0);
}

TEST(Stress, DrainRacingProducers) {
  Harness h(kProducers * kKeysPerProducer, StressOptions());
  std::atomic<bool> done{false};
  std::thread drainer([&] {
    while (!done.load()) {
      EXPECT_TRUE(h.Drain().ok());
      absl::SleepFor(absl::Milliseconds(3));
    }
  });
  RunProducers(h, 2000, Allowed{});
  done.store(true);
  drainer.join();
  const Outcomes o = StopWhenEmptyAndVerify(h);
  EXPECT_GT(o.drained, 0);
  RecordProperty("drained", o.drained);
}

// Callbacks that throw, block, and re-arm their key (Dubbo's reput pattern)
// while producers work on other keys.
TEST(Stress, ThrowingBlockingAndRearmingCallbacks) {
  constexpr int kRearmKeys = 16;
  constexpr int kChain = 30;  // fires per re-arming key
  const int rearm_base = kProducers * kKeysPerProducer;
  std::atomic<int> thrown{0};
  std::atomic<int> chains_done{0};
  std::vector<std::atomic<int>> chain(kRearmKeys);
  for (auto& c : chain) c.store(0);
  Harness h(rearm_base + kRearmKeys, StressOptions(3),
            [&](Harness& harness, int key, std::uint64_t id) {
              if (key >= rearm_base) {
                if (chain[key - rearm_base].fetch_add(1) + 1 < kChain) {
                  EXPECT_EQ(
                      harness.Set(key, absl::Microseconds(500 + id % 3000)),
                      StatusCode::kOk);
                } else {
                  chains_done.fetch_add(1);
                }
              }
              if (id % 11 == 0) absl::SleepFor(absl::Milliseconds(2));
              if (id % 7 == 0) {
                thrown.fetch_add(1);
                throw std::runtime_error("callback failure");
              }
            });
  for (int k = 0; k < kRearmKeys; ++k) {
    ASSERT_EQ(h.Set(rearm_base + k, absl::Milliseconds(1 + k)),
              StatusCode::kOk);
  }
  RunProducers(h, 1500, Allowed{});
  BecomesTrue([&] { return chains_done.load() >= kRearmKeys; });
  EXPECT_EQ(chains_done.load(), kRearmKeys);
  const Outcomes o = StopWhenEmptyAndVerify(h);
  EXPECT_GE(o.fired, kRearmKeys * kChain);
  EXPECT_GT(thrown.load(), 0);
  EXPECT_EQ(h.wheel().stats().callback_exceptions,
            static_cast<std::uint64_t>(thrown.load()));
}

// docs/api.md S6 and S10 with execute_workers = 4: a burst of 64 timers due
// together, whose callbacks hold their workers until all four run at once
// (so four callbacks provably run concurrently, never more), while the
// producers set, move and remove with their own timers firing on the same
// workers. Some callbacks sleep a little, so fires overlap throughout. Every
// value ends exactly one way.
TEST(Stress, FourExecuteWorkers) {
  constexpr int kWorkers = 4;
  constexpr int kBurst = 64;
  const int burst_base = kProducers * kKeysPerProducer;
  // Callbacks of the burst wait in it until four run at once.
  ConcurrencyBarrier barrier(kWorkers);
  Harness h(burst_base + kBurst, StressOptions(kWorkers),
            [&](Harness&, int key, std::uint64_t id) {
              if (key >= burst_base) {
                barrier.Enter();
              } else if (id % 5 == 0) {
                absl::SleepFor(absl::Microseconds(200));
              }
            });
  for (int k = 0; k < kBurst; ++k) {
    ASSERT_EQ(h.Set(burst_base + k, absl::Milliseconds(2)), StatusCode::kOk);
  }
  RunProducers(h, 2500, Allowed{});
  WaitUntilEmpty(h);
  ASSERT_TRUE(h.Stop().ok());
  h.MarkStoppedForCallbacks();
  EXPECT_TRUE(barrier.reached()) << "four callbacks never ran at once";
  EXPECT_EQ(barrier.max_inside(), kWorkers);
  const Outcomes o = h.Verify();
  h.VerifyStats(o);
  EXPECT_GE(o.fired, kBurst);
  EXPECT_GT(o.destroyed, 0);
  RecordProperty("fired", o.fired);
}

// A flood against a tiny max_pending: every call is accepted or refused with
// ResourceExhausted, and the accepted ones are all accounted for.
TEST(Stress, MaxPendingFlood) {
  Options options = StressOptions();
  options.max_pending = 2;
  Harness h(kProducers * kKeysPerProducer, options);
  // Bursts of 8 calls against a bound of 2 (some refused for sure), with
  // pauses in which the loop drains (some accepted for sure).
  RunProducers(h, 2500, Allowed{.resource_exhausted = true}, /*pause=*/true);
  const Outcomes o = StopWhenEmptyAndVerify(h);
  EXPECT_GT(o.accepted, 0);
  EXPECT_GT(o.refused, 0);
  RecordProperty("refused_sets", o.refused);
}

}  // namespace
}  // namespace timingwheel
