// <timingwheel/asio.h>: an AsioLocalWheel fires on its io_context's thread,
// never early on the steady clock (nor before a kept deadline), re-arms
// its one wait only when a timer falls due before it, and outlives
// nothing; PostTo and PostToExecutorOf run a TimingWheel's callbacks on the
// executor named. Real time with generous bounds: they decide "not before"
// and "at all", never speed.
#include "timingwheel/asio.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "asio/io_context.hpp"
#include "asio/post.hpp"
#include "asio/steady_timer.hpp"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Wheel = AsioLocalWheel<int, Clock::time_point>;

struct FiredAt {
  int key;
  Clock::time_point deadline;  // what the test asked for
  Clock::time_point at;        // when fire ran
  std::thread::id thread;
};

// Runs `io` on this thread until `done` or the time limit.
void RunFor(::asio::io_context& io, const std::function<bool()>& done,
            std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = Clock::now() + limit;
  while (!done() && Clock::now() < end) {
    io.run_for(milliseconds(5));
    if (io.stopped()) io.restart();
  }
}

TEST(AsioLocalWheel, FiresOnTheIoThreadNeverEarly) {
  ::asio::io_context io;
  std::vector<FiredAt> fired;
  auto wheel =
      Wheel::Create(io.get_executor(), {.interval = absl::Milliseconds(1)},
                    [&](int k, Clock::time_point deadline) {
                      fired.push_back({k, deadline, Clock::now(),
                                       std::this_thread::get_id()});
                    });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  // Set from the io thread, as a server does: in a posted handler.
  ::asio::post(io, [&] {
    const auto now = Clock::now();
    for (int k = 0; k < 20; ++k) {
      const milliseconds d(5 + 7 * (k % 5));
      ASSERT_TRUE((*wheel)->Set(k, now + d, d).ok());
    }
    // Pushed later, as on each request.
    ASSERT_TRUE((*wheel)->Move(0, milliseconds(60)).ok());
    EXPECT_EQ((*wheel)->Move(99, milliseconds(60)).code(),
              absl::StatusCode::kNotFound);
    EXPECT_TRUE((*wheel)->Remove(1));
  });
  RunFor(io, [&] { return fired.size() == 19; });
  ASSERT_EQ(fired.size(), 19u);
  for (const FiredAt& f : fired) {
    EXPECT_EQ(f.thread, std::this_thread::get_id());
    EXPECT_NE(f.key, 1);
    if (f.key != 0) {
      EXPECT_GE(f.at, f.deadline) << "key " << f.key;
    }
  }
  // Key 0 fired last, after its move.
  EXPECT_EQ(fired.back().key, 0);
  EXPECT_GE(fired.back().at, fired.back().deadline + milliseconds(55));
  EXPECT_EQ((*wheel)->wheel().stats().fired, 19u);
}

// A timer due before the wait under way ends wakes the io_context sooner;
// one due after it does not touch the wait.
TEST(AsioLocalWheel, AnEarlierTimerReArmsTheWait) {
  ::asio::io_context io;
  std::vector<int> fired;
  auto wheel =
      *Wheel::Create(io.get_executor(), {.interval = absl::Milliseconds(1)},
                     [&](int k, Clock::time_point) { fired.push_back(k); });
  Clock::time_point start;
  ::asio::post(io, [&] {
    start = Clock::now();
    ASSERT_TRUE(wheel->Set(1, {}, absl::Seconds(10)).ok());
    ASSERT_TRUE(wheel->Set(2, {}, absl::Milliseconds(20)).ok());
  });
  RunFor(io, [&] { return !fired.empty(); });
  ASSERT_EQ(fired, std::vector<int>{2});
  // Well before key 1's 10 s: the wait was moved up for key 2.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(9));
  EXPECT_GE(Clock::now() - start, milliseconds(20));
  EXPECT_EQ(wheel->wheel().size(), 1u);
}

// With kept deadlines: pushing a connection's deadline is a store, and the
// wheel, woken for the timer's own deadline, waits again for the kept one.
TEST(AsioLocalWheel, KeptDeadlinesHoldTimersBackUntilThen) {
  ::asio::io_context io;
  using KeptWheel = AsioLocalWheel<int, Clock::time_point*>;
  std::vector<FiredAt> fired;
  Clock::time_point idle_until[3] = {};
  auto wheel = *KeptWheel::Create(
      io.get_executor(), {.interval = absl::Milliseconds(1)},
      [&](int k, Clock::time_point* until) {
        fired.push_back({k, *until, Clock::now(), std::this_thread::get_id()});
      },
      [](Clock::time_point* const& until) { return *until; });
  Clock::time_point start;
  ::asio::post(io, [&] {
    start = Clock::now();
    for (int k = 0; k < 3; ++k) {
      idle_until[k] = start + milliseconds(10);
      ASSERT_TRUE(wheel->Set(k, &idle_until[k], milliseconds(10)).ok());
    }
    // Requests on keys 1 and 2 push their deadlines, with no wheel call.
    idle_until[1] = start + milliseconds(60);
    idle_until[2] = start + milliseconds(120);
  });
  RunFor(io, [&] { return fired.size() == 3; });
  ASSERT_EQ(fired.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(fired[k].key, k);
    EXPECT_GE(fired[k].at, fired[k].deadline) << "key " << k;
    EXPECT_EQ(fired[k].thread, std::this_thread::get_id());
  }
  EXPECT_GE(wheel->wheel().stats().refiled, 2u);
  EXPECT_EQ(wheel->wheel().size(), 0u);
}

// A fire function re-arms its own key (a heartbeat) and the wheel keeps
// waking for it.
TEST(AsioLocalWheel, HeartbeatReArmsFromFire) {
  ::asio::io_context io;
  int beats = 0;
  std::unique_ptr<Wheel> wheel;
  wheel =
      *Wheel::Create(io.get_executor(), {.interval = absl::Milliseconds(1)},
                     [&](int k, Clock::time_point) {
                       if (++beats < 5) {
                         EXPECT_TRUE(wheel->Set(k, {}, milliseconds(3)).ok());
                       }
                     });
  ::asio::post(io,
               [&] { ASSERT_TRUE(wheel->Set(7, {}, milliseconds(3)).ok()); });
  RunFor(io, [&] { return beats >= 5; });
  EXPECT_EQ(beats, 5);
  EXPECT_EQ(wheel->wheel().size(), 0u);
}

// Destroyed with its wait's completion already queued: the completion
// finds the wheel gone and does nothing (ASan would see a use after free).
TEST(AsioLocalWheel, DestroyedWithACompletionQueued) {
  ::asio::io_context io;
  int fired = 0;
  auto wheel =
      *Wheel::Create(io.get_executor(), {.interval = absl::Milliseconds(1)},
                     [&](int, Clock::time_point) { ++fired; });
  ::asio::post(io,
               [&] { ASSERT_TRUE(wheel->Set(1, {}, milliseconds(2)).ok()); });
  io.poll();  // the Set ran; its wait is armed
  std::this_thread::sleep_for(milliseconds(20));
  wheel.reset();  // the timer has expired; its completion may be queued
  io.restart();
  io.run_for(milliseconds(50));
  EXPECT_EQ(fired, 0);
}

TEST(AsioLocalWheel, RefusesAnEmptyFireAndBadOptions) {
  ::asio::io_context io;
  EXPECT_EQ(Wheel::Create(io.get_executor(), {}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Wheel::Create(io.get_executor(), {.num_slots = 0},
                          [](int, Clock::time_point) {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A shared TimingWheel's fired timers run on the executor each value
// names: here two io_contexts on two threads, as two io threads of a
// server, each key's callback on its own one.
TEST(PostTo, CallbacksRunOnTheNamedExecutor) {
  ::asio::io_context a, b;
  auto guard_a = ::asio::make_work_guard(a);
  auto guard_b = ::asio::make_work_guard(b);
  std::thread ta([&] { a.run(); });
  std::thread tb([&] { b.run(); });
  std::atomic<int> wrong{0}, done{0};
  struct Target {
    ::asio::io_context* io;
    std::thread::id thread;
  };
  Options options;
  options.interval = absl::Milliseconds(1);
  auto wheel = TimingWheel<int, Target>::Create(
      options,
      PostToExecutorOf<int, Target>(
          [](const int&, const Target& t) { return t.io->get_executor(); },
          [&](int, Target t) {
            if (std::this_thread::get_id() != t.thread) wrong.fetch_add(1);
            done.fetch_add(1);
          }));
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 200; ++k) {
    const Target t =
        k % 2 == 0 ? Target{&a, ta.get_id()} : Target{&b, tb.get_id()};
    ASSERT_TRUE((*wheel)->SetTimer(k, t, milliseconds(1 + k % 10)).ok());
  }
  // One fixed executor too.
  std::atomic<int> on_a{0};
  auto fixed = TimingWheel<int, int>::Create(
      options, PostTo<int, int>(a.get_executor(), [&](int, int) {
        if (std::this_thread::get_id() == ta.get_id()) on_a.fetch_add(1);
      }));
  ASSERT_TRUE(fixed.ok());
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE((*fixed)->SetTimer(k, k, milliseconds(2)).ok());
  }
  const auto end = Clock::now() + std::chrono::seconds(20);
  while ((done.load() < 200 || on_a.load() < 10) && Clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  wheel->reset();
  fixed->reset();
  guard_a.reset();
  guard_b.reset();
  ta.join();
  tb.join();
  EXPECT_EQ(done.load(), 200);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(on_a.load(), 10);
}

}  // namespace
}  // namespace timingwheel
