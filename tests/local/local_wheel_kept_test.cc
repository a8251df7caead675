// LocalWheel's Advance with `kept` (docs/api.md "LocalWheel", kept
// deadlines): a deadline the caller keeps in its own object, read when
// the timer comes due. Never early against either deadline, each timer
// ends once, the timer stays in the wheel while its kept deadline holds it
// back, and a kept function that throws lets the timer fire. Time is the
// test's: explicit time points, no clock.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "timingwheel/local_wheel.h"

namespace timingwheel {
namespace local_wheel_kept_test {

using std::chrono::milliseconds;

// What a server keeps per connection: the deadline its requests push.
struct Session {
  int id = 0;
  std::chrono::steady_clock::time_point idle_until{};
};

using SessionWheel = LocalWheel<int, Session*>;
using TimePoint = SessionWheel::TimePoint;

const TimePoint kT0 = TimePoint(std::chrono::hours(2000));

std::unique_ptr<SessionWheel> MakeWheel() {
  absl::StatusOr<std::unique_ptr<SessionWheel>> w = SessionWheel::Create(
      {.interval = absl::Milliseconds(10), .num_slots = 8}, kT0);
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

TimePoint IdleUntil(Session* const& s) { return s->idle_until; }

// Advance(now, fire, kept) that records the ids that fired, in order.
std::vector<int> AdvanceTo(SessionWheel& w, TimePoint now) {
  std::vector<int> fired;
  w.Advance(
      now, [&](int id, Session*) { fired.push_back(id); }, IdleUntil);
  return fired;
}

TEST(LocalWheelKept, ALaterKeptDeadlineHoldsTheTimerUntilIt) {
  auto w = MakeWheel();
  Session s{.id = 1};
  ASSERT_TRUE(w->SetAt(1, &s, kT0 + milliseconds(20)).ok());
  s.idle_until = kT0 + milliseconds(55);  // a request pushed it later
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(20)).empty());
  EXPECT_EQ(w->size(), 1u);
  EXPECT_EQ(w->stats().refiled, 1u);
  // Filed again for the kept deadline, rounded up to its tick.
  EXPECT_EQ(w->DeadlineOf(1), kT0 + milliseconds(60));
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(59)).empty());
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(60)), std::vector<int>{1});
  EXPECT_EQ(w->size(), 0u);
  EXPECT_EQ(w->stats().fired, 1u);
  EXPECT_TRUE(w->CheckInvariants().ok());
}

TEST(LocalWheelKept, PushedAgainAndAgainFiresOnceOnTheLastDeadline) {
  auto w = MakeWheel();
  Session s{.id = 7};
  ASSERT_TRUE(w->SetAt(7, &s, kT0 + milliseconds(30)).ok());
  // A request every 10 ms pushes it 30 ms on, across several rotations
  // of an 8-slot level 0; it fires 30 ms after the last one.
  TimePoint now = kT0;
  for (int request = 0; request < 40; ++request) {
    s.idle_until = now + milliseconds(30);
    EXPECT_TRUE(AdvanceTo(*w, now).empty()) << "request " << request;
    now += milliseconds(10);
  }
  const TimePoint last = now - milliseconds(10);
  EXPECT_TRUE(AdvanceTo(*w, last + milliseconds(29)).empty());
  EXPECT_EQ(AdvanceTo(*w, last + milliseconds(30)), std::vector<int>{7});
  // Read on the tick it was due, not on every push: about one refiling
  // for each 30 ms of pushes.
  EXPECT_LE(w->stats().refiled, 20u);
  EXPECT_TRUE(w->CheckInvariants().ok());
}

TEST(LocalWheelKept, AnEarlierKeptDeadlineDoesNotBringTheTimerForward) {
  auto w = MakeWheel();
  Session s{.id = 2, .idle_until = kT0 + milliseconds(10)};
  ASSERT_TRUE(w->SetAt(2, &s, kT0 + milliseconds(50)).ok());
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(40)).empty());
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(50)), std::vector<int>{2});
  EXPECT_EQ(w->stats().refiled, 0u);
}

TEST(LocalWheelKept, KeptDeadlinesWithinOneAdvanceFireInDeadlineOrder) {
  auto w = MakeWheel();
  Session a{.id = 1, .idle_until = kT0 + milliseconds(45)};
  Session b{.id = 2};
  Session c{.id = 3, .idle_until = kT0 + milliseconds(25)};
  ASSERT_TRUE(w->SetAt(1, &a, kT0 + milliseconds(10)).ok());
  ASSERT_TRUE(w->SetAt(2, &b, kT0 + milliseconds(30)).ok());
  ASSERT_TRUE(w->SetAt(3, &c, kT0 + milliseconds(10)).ok());
  // One jump past all three: c at 30 (its kept 25, rounded up) with b, a at 50.
  const std::vector<int> fired = AdvanceTo(*w, kT0 + milliseconds(100));
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired.back(), 1);
  EXPECT_EQ(w->size(), 0u);
}

TEST(LocalWheelKept, HeldBackTimersCanBeRemovedMovedAndTakenBack) {
  auto w = MakeWheel();
  Session a{.id = 1, .idle_until = kT0 + milliseconds(200)};
  Session b{.id = 2, .idle_until = kT0 + milliseconds(200)};
  Session c{.id = 3, .idle_until = kT0 + milliseconds(200)};
  for (Session* s : {&a, &b, &c}) {
    ASSERT_TRUE(w->SetAt(s->id, s, kT0 + milliseconds(10)).ok());
  }
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(10)).empty());
  EXPECT_EQ(w->size(), 3u);
  EXPECT_TRUE(w->Remove(1));  // closed by the peer: never fires
  // Move sets the wheel's deadline; the kept one still holds it back.
  ASSERT_TRUE(w->MoveAt(2, kT0 + milliseconds(20)).ok());
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(190)).empty());
  std::vector<std::pair<int, Session*>> rest = w->TakeAll();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(w->size(), 0u);
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(500)).empty());
}

TEST(LocalWheelKept, AKeptFunctionThatThrowsLetsTheTimerFire) {
  auto w = MakeWheel();
  Session s{.id = 4, .idle_until = kT0 + milliseconds(500)};
  ASSERT_TRUE(w->SetAt(4, &s, kT0 + milliseconds(10)).ok());
  std::vector<int> fired;
  w->Advance(
      kT0 + milliseconds(10), [&](int id, Session*) { fired.push_back(id); },
      [](Session* const&) -> TimePoint { throw std::runtime_error("kept"); });
  EXPECT_EQ(fired, std::vector<int>{4});
  EXPECT_EQ(w->stats().callback_exceptions, 1u);
  EXPECT_EQ(w->size(), 0u);
}

TEST(LocalWheelKept, FireMayArmAgainWithAKeptDeadline) {
  // A heartbeat: each firing sets the next one and keeps a later deadline.
  auto w = MakeWheel();
  Session s{.id = 9};
  ASSERT_TRUE(w->SetAt(9, &s, kT0 + milliseconds(10)).ok());
  int beats = 0;
  TimePoint now = kT0;
  for (int step = 0; step < 20; ++step) {
    now += milliseconds(10);
    w->Advance(
        now,
        [&](int id, Session* session) {
          ++beats;
          session->idle_until = now + milliseconds(40);
          ASSERT_TRUE(w->SetAt(id, session, now + milliseconds(10)).ok());
        },
        IdleUntil);
  }
  // Fired at 10, then every 40 ms after: 10, 50, 90, 130, 170.
  EXPECT_EQ(beats, 5);
  EXPECT_EQ(w->size(), 1u);
  EXPECT_TRUE(w->CheckInvariants().ok());
}

#if TIMINGWHEEL_DCHECK_IS_ON
// kept runs in the middle of the wheel's scan: a call into the wheel from
// it is refused where TW_DCHECK checks.
TEST(LocalWheelKeptDeathTest, KeptMustNotCallTheWheel) {
  EXPECT_DEATH(
      {
        auto w = MakeWheel();
        Session s{.id = 1};
        ASSERT_TRUE(w->SetAt(1, &s, kT0 + milliseconds(10)).ok());
        w->Advance(
            kT0 + milliseconds(10), [](int, Session*) {},
            [&](Session* const&) {
              w->Remove(1);
              return TimePoint::min();
            });
      },
      "scanning_");
}
#endif

}  // namespace local_wheel_kept_test
}  // namespace timingwheel
