// docs/api.md "Batch calls" B1-B3, through the public header only:
// SetTimers, MoveTimers and RemoveTimers act as the single calls in span
// order with one submission time (B1), are accepted or refused whole with
// `items` left as they were (B2), and accept an empty span (B3). The loop is
// held busy (HeldLoop) where a test needs commands to stay queued. One
// submission time against real time is
// RealTime.ABatchsItemsShareOneSubmissionTime in realtime_test.cc.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/hang_guard.h"
#include "../common/held_loop.h"
#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace batch_test {

using ::absl::StatusCode;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::Fire;
using ::timingwheel::testing::GatedEq;
using ::timingwheel::testing::GateScope;
using ::timingwheel::testing::HeldLoop;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::LoopGate;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::StopSorted;
using ::timingwheel::testing::TestOptions;
using ::timingwheel::testing::TestOptionsWithMaxLag;

// ---------------------------------------------------------------------------
// docs/api.md "Batch calls" B1-B3.

// B1: a batch is the single calls in span order with one submission time:
// every item of a SetTimers fires on the same tick, with its own value; a
// key twice in one batch is set twice (the later wins, the earlier is
// superseded); MoveTimers and RemoveTimers act on each key.
TEST(B1Batch, SetTimersIsEachSetInOrderWithOneSubmissionTime) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> items;
  for (int k = 0; k < 300; ++k) items.emplace_back(k, 1000 + k);
  items.emplace_back(7, 7777);  // set again later in the same batch
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(items), 3 * kInterval).ok());
  w.Tick(2);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  ASSERT_EQ(w.fires().size(), 300u);
  for (const Fire& f : w.fires()) {
    EXPECT_EQ(f.tick, 3);
    EXPECT_EQ(f.value, f.key == 7 ? 7777 : 1000 + f.key) << f.key;
  }
  const Stats s = w.wheel().stats();
  EXPECT_EQ(s.applied, 301u);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

TEST(B1Batch, MoveTimersAndRemoveTimersActOnEveryKey) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> items;
  for (int k = 0; k < 100; ++k) items.emplace_back(k, k);
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(items), kInterval).ok());
  std::vector<int> move, remove;
  for (int k = 0; k < 100; ++k) (k % 3 == 0 ? remove : move).push_back(k);
  move.push_back(1000);    // absent: ignored
  remove.push_back(1001);  // absent: ignored
  ASSERT_TRUE(w.wheel().MoveTimers(move, 5 * kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimers(remove).ok());
  w.Tick(4);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  std::vector<int> expected(move.begin(), move.end() - 1);
  EXPECT_EQ(w.KeysFiredAt(5), expected);
  const Stats s = w.wheel().stats();
  EXPECT_EQ(s.moved, expected.size());
  EXPECT_EQ(s.removed, 34u);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// B1: batches and single calls from one thread are applied in the order
// they were made.
TEST(B1Batch, BatchesKeepTheirPlaceAmongSingleCalls) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> first = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(first), kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(1).ok());
  const std::vector<int> both = {1, 2};
  ASSERT_TRUE(w.wheel().RemoveTimers(both).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 20, 2 * kInterval).ok());
  std::vector<std::pair<int, int>> again = {{1, 10}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(again), 2 * kInterval).ok());
  ASSERT_TRUE(w.wheel().MoveTimers(both, std::chrono::milliseconds(30)).ok());
  w.Tick(2);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{1, 2}));
  for (const Fire& f : w.fires()) EXPECT_EQ(f.value, f.key * 10);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// B1: SetTimers moves keys and values out of the items it accepted; the
// chrono overloads take any duration.
TEST(B1Batch, SetTimersMovesOutOfItemsAndTakesChrono) {
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<std::string, std::string> fired;
  auto wheel = TimingWheel<std::string, std::string>::Create(
      ManualOptions(ticker), [&](std::string key, std::string value) {
        std::lock_guard<std::mutex> lock(mu);
        fired.emplace(std::move(key), std::move(value));
      });
  ASSERT_TRUE(wheel.ok());
  const std::string long_key(40, 'k'), long_value(40, 'v');
  std::vector<std::pair<std::string, std::string>> items = {
      {long_key + "1", long_value + "1"}, {long_key + "2", long_value + "2"}};
  ASSERT_TRUE(
      (*wheel)
          ->SetTimers(absl::MakeSpan(items), std::chrono::milliseconds(10))
          .ok());
  for (const auto& [key, value] : items) {
    EXPECT_TRUE(key.empty());  // libstdc++ empties a moved-from long string
    EXPECT_TRUE(value.empty());
  }
  const std::vector<std::string> keys = {long_key + "2"};
  ASSERT_TRUE((*wheel)->MoveTimers(keys, std::chrono::milliseconds(20)).ok());
  EXPECT_EQ(keys.front(), long_key + "2");  // copied, not moved
  ticker->Tick();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(fired, (std::map<std::string, std::string>{
                         {long_key + "1", long_value + "1"}}));
  }
  ticker->Tick();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[long_key + "2"], long_value + "2");
}

// B2: a refused batch has no effect and leaves `items` as it was: a bad
// delay, a stopped wheel.
TEST(B2Batch, RefusedBatchChangesNothing) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fired{0};
  auto wheel = TimingWheel<std::string, std::string>::Create(
      ManualOptions(ticker), [&](std::string, std::string) { ++fired; });
  ASSERT_TRUE(wheel.ok());
  const std::string key(40, 'k'), value(40, 'v');
  std::vector<std::pair<std::string, std::string>> items = {{key, value}};
  const std::vector<std::string> keys = {key};
  for (absl::Duration bad :
       {absl::ZeroDuration(), -kInterval, absl::InfiniteDuration()}) {
    EXPECT_EQ((*wheel)->SetTimers(absl::MakeSpan(items), bad).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*wheel)->MoveTimers(keys, bad).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ((*wheel)
                ->SetTimers(absl::MakeSpan(items),
                            std::chrono::duration<double>(-1.0))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(items.front(), std::make_pair(key, value));
  ticker->Tick(3);
  EXPECT_EQ(fired.load(), 0);
  EXPECT_EQ((*wheel)->stats().applied, 0u);

  ASSERT_TRUE((*wheel)->Stop().ok());
  EXPECT_EQ((*wheel)->SetTimers(absl::MakeSpan(items), kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ((*wheel)->MoveTimers(keys, kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ((*wheel)->RemoveTimers(keys).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(items.front(), std::make_pair(key, value));
}

// B2 with max_pending: a batch that does not fit now is refused whole
// (ResourceExhausted) and one that never can is InvalidArgument; the loop
// is held busy (HeldLoop).
TEST(B2Batch, MaxPendingTakesAWholeBatchOrNone) {
  constexpr int kMaxPending = 5;
  HeldLoop held(kMaxPending);
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Entries three = {{1, 1}, {2, 2}, {3, 3}};
  Entries three_more = {{4, 4}, {5, 5}, {6, 6}};
  Entries six = {{11, 1}, {12, 2}, {13, 3}, {14, 4}, {15, 5}, {16, 6}};
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(three), kInterval).ok());
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(three_more), kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(three_more.front(), std::make_pair(4, 4));
  const std::vector<int> keys3 = {1, 2, 3};
  EXPECT_EQ(w.wheel().RemoveTimers(keys3).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(six), kInterval).code(),
            StatusCode::kInvalidArgument);
  // Larger than max_pending: never fits, for every batch call alike.
  const std::vector<int> keys6 = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(w.wheel().MoveTimers(keys6, kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().RemoveTimers(keys6).code(), StatusCode::kInvalidArgument);
  const std::vector<int> keys2 = {1, 2};
  EXPECT_TRUE(w.wheel().MoveTimers(keys2, 2 * kInterval).ok());  // fills it

  held.Release();
  // Set at tick 0 with one interval, key 3 is due on tick 1; keys 1 and 2
  // were moved one tick further.
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{3}));
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// B2 with values a move would visibly empty: a refused batch leaves every
// key and value in `items` as it was, whether it is refused for room now
// (ResourceExhausted: the loop is held comparing keys, so the queue
// stays full) or as larger than max_pending can ever take
// (InvalidArgument). An accepted batch then takes them.
TEST(B2Batch, ARefusedBatchLeavesStringItemsAsTheyWere) {
  using StringWheel = TimingWheel<std::string, std::string,
                                  absl::Hash<std::string>, GatedEq>;
  using Items = std::vector<std::pair<std::string, std::string>>;
  auto ticker = std::make_shared<ManualTicker>();
  Options options = TestOptions();
  options.ticker = ticker;
  options.max_pending = 3;
  LoopGate gate;
  GateScope scope(&gate);
  std::mutex mu;
  std::vector<std::string> fired;
  auto wheel =
      StringWheel::Create(options, [&](std::string key, std::string value) {
        std::lock_guard<std::mutex> lock(mu);
        fired.push_back(key + "=" + value);
      });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  StringWheel& w = **wheel;
  ASSERT_TRUE(w.SetTimer("hold", "", absl::Hours(1)).ok());
  ASSERT_TRUE(w.MoveTimer("hold", absl::Hours(1)).ok());  // held comparing
  ASSERT_TRUE(gate.entered.WaitFor(kHangGuard));
  const std::string pad(40, 'x');  // beyond the small-string buffer
  auto item = [&](int i) {
    return std::make_pair("key" + std::to_string(i) + pad,
                          "value" + std::to_string(i) + pad);
  };
  Items fill = {item(0), item(1)};
  ASSERT_TRUE(w.SetTimers(absl::MakeSpan(fill), kInterval).ok());
  Items two = {item(2), item(3)};
  const Items two_before = two;
  EXPECT_EQ(w.SetTimers(absl::MakeSpan(two), kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(two, two_before);
  Items four = {item(4), item(5), item(6), item(7)};
  const Items four_before = four;
  EXPECT_EQ(w.SetTimers(absl::MakeSpan(four), kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(four, four_before);
  gate.released.Notify();
  // max_pending counts commands queued and not yet applied, and nothing
  // says the loop has applied `fill` by now: this thread's Tick, queued
  // behind it, returns once it has (S9), and fires it.
  ticker->Tick();
  ASSERT_TRUE(w.SetTimers(absl::MakeSpan(two), kInterval).ok());
  ticker->Tick(2);
  std::lock_guard<std::mutex> lock(mu);
  std::sort(fired.begin(), fired.end());
  std::vector<std::string> want;
  for (int i : {0, 1, 2, 3})
    want.push_back(item(i).first + "=" + item(i).second);
  EXPECT_EQ(fired, want);
}

// B2 for MoveTimers on keys that are present: a refused MoveTimers moves
// none of them, whether it is refused for room now (ResourceExhausted),
// as larger than max_pending can ever take (InvalidArgument) or for a bad
// delay (InvalidArgument). The keys fire where they were.
TEST(B2Batch, ARefusedMoveTimersMovesNothing) {
  constexpr int kMaxPending = 3;
  HeldLoop held(kMaxPending);
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Entries two = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(two), kInterval).ok());
  const std::vector<int> keys12 = {1, 2};
  EXPECT_EQ(w.wheel().MoveTimers(keys12, 5 * kInterval).code(),
            StatusCode::kResourceExhausted);
  const std::vector<int> keys1234 = {1, 2, 3, 4};
  EXPECT_EQ(w.wheel().MoveTimers(keys1234, 5 * kInterval).code(),
            StatusCode::kInvalidArgument);
  held.Release();
  // Set at tick 0 with one interval: due on tick 1, not moved to 5.
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2}));

  Entries later = {{5, 5}, {6, 6}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(later), 2 * kInterval).ok());
  const std::vector<int> keys56 = {5, 6};
  for (absl::Duration bad :
       {absl::ZeroDuration(), -kInterval, absl::InfiniteDuration()}) {
    EXPECT_EQ(w.wheel().MoveTimers(keys56, bad).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(
      w.wheel().MoveTimers(keys56, std::chrono::duration<double>(-1.0)).code(),
      StatusCode::kInvalidArgument);
  w.Tick();
  EXPECT_TRUE(w.KeysFiredAt(2).empty());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{5, 6}));
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// B2: a batch larger than max_pending is refused even when the queue is
// empty (the loop idle, every earlier command applied): InvalidArgument,
// for each batch call, with no effect on the keys it names.
TEST(B2Batch, ABatchLargerThanMaxPendingIsRefusedIntoAnEmptyQueue) {
  Options options = TestOptions();
  options.max_pending = 2;
  ManualWheel w(8, nullptr, options);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 3 * kInterval).ok());
  w.Tick();  // queued behind the sets: they are applied (S9)
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, 2 * kInterval).ok());
  w.Tick();  // all three due on tick 3; the queue is empty again

  Entries three = {{1, 10}, {2, 20}, {3, 30}};
  const Entries three_before = three;
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(three), kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(three, three_before);
  const std::vector<int> keys = {1, 2, 3};
  EXPECT_EQ(w.wheel().MoveTimers(keys, 10 * kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().RemoveTimers(keys).code(), StatusCode::kInvalidArgument);
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{1, 2, 3}));
  // Key 1's value was not replaced by the refused SetTimers.
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1).front().value, 1);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// B3: an empty span is accepted and does nothing.
TEST(B3Batch, EmptySpanIsAcceptedAndDoesNothing) {
  ManualWheel w(8);
  Entries none;
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(none), kInterval).ok());
  EXPECT_TRUE(w.wheel().MoveTimers({}, kInterval).ok());
  EXPECT_TRUE(w.wheel().RemoveTimers({}).ok());
  w.Tick();
  EXPECT_EQ(w.wheel().stats().applied, 0u);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// B3: an empty span is accepted even when no command would be: the queue
// full under max_pending, or max_lag refusing (the loop held in both).
TEST(B3Batch, EmptySpanIsAcceptedWhenTheQueueIsFull) {
  Options pending = TestOptions();
  pending.max_pending = 1;
  for (const Options& options :
       {pending, TestOptionsWithMaxLag(absl::Nanoseconds(1))}) {
    HeldLoop held(options);
    auto& w = held.w();
    ASSERT_TRUE(held.Held());
    ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
    ASSERT_EQ(w.wheel().SetTimer(2, 2, kInterval).code(),
              StatusCode::kResourceExhausted);
    Entries none;
    EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(none), kInterval).ok());
    EXPECT_TRUE(w.wheel().MoveTimers({}, kInterval).ok());
    EXPECT_TRUE(w.wheel().RemoveTimers({}).ok());
    held.Release();
    w.Tick();
    EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1}));
    EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
  }
}

// Every timer ends exactly one way when several threads submit batches at
// once: each thread sets its own keys in batches, removes every third key
// in a batch, and moves the rest; each key then fires once or is removed
// once, and none is lost.
TEST(B1Batch, ConcurrentBatchesEndEveryTimerExactlyOnce) {
  constexpr int kThreads = 4, kPerThread = 3000, kBatch = 256;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<int, int> fired;  // key -> times fired
  auto wheel = IntWheel::Create(ManualOptions(ticker, 64), [&](int key, int) {
    std::lock_guard<std::mutex> lock(mu);
    ++fired[key];
  });
  ASSERT_TRUE(wheel.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> removed, kept;
      for (int start = 0; start < kPerThread; start += kBatch) {
        Entries items;
        for (int i = start; i < std::min(kPerThread, start + kBatch); ++i) {
          const int key = t * kPerThread + i;
          items.emplace_back(key, key);
          (i % 3 == 0 ? removed : kept).push_back(key);
        }
        EXPECT_TRUE(
            (*wheel)->SetTimers(absl::MakeSpan(items), 5 * kInterval).ok());
      }
      EXPECT_TRUE((*wheel)->RemoveTimers(removed).ok());
      EXPECT_TRUE((*wheel)->MoveTimers(kept, 10 * kInterval).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ticker->Tick(9);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(fired.empty());
  }
  ticker->Tick();
  const Stats s = (*wheel)->stats();
  EXPECT_EQ(s.removed, static_cast<std::uint64_t>(kThreads * 1000));
  EXPECT_EQ(s.fired, static_cast<std::uint64_t>(kThreads * 2000));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired.size(), static_cast<std::size_t>(kThreads * 2000));
  for (const auto& [key, times] : fired) {
    EXPECT_EQ(times, 1) << key;
    EXPECT_NE(key % kPerThread % 3, 0) << key;
  }
}

}  // namespace batch_test
}  // namespace timingwheel
