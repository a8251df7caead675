// LocalWheel against the wheel's model (tests/wheel/wheel_model.h): random
// programs of SetAt, MoveAt, Remove and Advance on time points, with time
// jumps from under a tick to hours, checked after every step: what fired,
// in deadline order, each once and never early; DeadlineOf; NextDue never
// after the model's next firing; the wheel's invariants. The same programs
// with kept deadlines (Advance's `kept`) as well: each key's deadline kept
// outside the wheel, pushed and pulled at random, and the model's timers
// filed again when their kept deadline is later on the tick they are due.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "timingwheel/local_wheel.h"
#include "wheel_model.h"

namespace timingwheel {
namespace local_wheel_model_test {

using std::chrono::nanoseconds;
using W = LocalWheel<std::uint32_t, std::uint64_t>;
using TimePoint = W::TimePoint;
using testing::WheelModel;

constexpr std::int64_t kIntervalNs = 1'000'000;  // 1 ms
const TimePoint kT0 = TimePoint(std::chrono::hours(10));

std::uint64_t CeilTick(TimePoint t) {
  const std::int64_t rel = (t - kT0).count();
  return rel <= 0 ? 0 : (rel + kIntervalNs - 1) / kIntervalNs;
}
std::uint64_t FloorTick(TimePoint t) {
  const std::int64_t rel = (t - kT0).count();
  return rel <= 0 ? 0 : rel / kIntervalNs;
}
TimePoint TimeOf(std::uint64_t tick) {
  return kT0 + nanoseconds(static_cast<std::int64_t>(tick) * kIntervalNs);
}

// A time offset drawn so that programs hit every level: mostly within a
// few rotations of level 0, sometimes minutes or hours out, and sometimes
// not on a tick boundary.
nanoseconds DrawOffset(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 10);
  std::int64_t ns;
  if (kind < 5) {
    ns = static_cast<std::int64_t>(rng() % 40) * kIntervalNs;
  } else if (kind < 8) {
    ns = static_cast<std::int64_t>(rng() % 5'000) * kIntervalNs;
  } else {
    ns = static_cast<std::int64_t>(rng() % 10'000'000) * kIntervalNs;
  }
  if (rng() % 4 == 0) ns += static_cast<std::int64_t>(rng() % kIntervalNs);
  return nanoseconds(ns);
}

// A timer's value names its key (value % kKeySpace), so that `kept` finds
// the key's kept deadline from the value alone, as a server's finds it in
// the connection the value points to.
constexpr std::uint64_t kKeySpace = 4096;

void RunProgram(std::uint64_t seed, int steps, std::uint32_t keys,
                bool kept_deadlines = false) {
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << " kept " << kept_deadlines);
  ASSERT_LE(keys, kKeySpace);
  std::mt19937_64 rng(seed);
  auto w = *W::Create({.interval = absl::Nanoseconds(kIntervalNs),
                       .num_slots = 8,
                       .memory_decay = absl::Milliseconds(200)},
                      kT0);
  WheelModel model;
  TimePoint now = kT0;
  std::uint64_t next_value = 1;
  // The deadlines the caller keeps, by key (absent: none kept).
  std::unordered_map<std::uint32_t, TimePoint> kept;
  for (int step = 0; step < steps; ++step) {
    const std::uint32_t key = static_cast<std::uint32_t>(rng() % keys);
    const int op = static_cast<int>(rng() % 100);
    if (kept_deadlines && rng() % 5 == 0) {
      // A request pushes the key's kept deadline (sometimes back before
      // the wheel's, which must not bring the timer forward).
      kept[key] = now + DrawOffset(rng);
      if (rng() % 8 == 0) kept[key] = now - DrawOffset(rng);
    } else if (op < 35) {
      // A deadline around now, sometimes in the past.
      TimePoint deadline = now + DrawOffset(rng);
      if (rng() % 8 == 0) deadline = now - DrawOffset(rng);
      const std::uint64_t v = next_value++ * kKeySpace + key;
      ASSERT_TRUE(w->SetAt(key, v, deadline).ok());
      model.Set(key, v, CeilTick(deadline));
    } else if (op < 60) {
      const TimePoint deadline = now + DrawOffset(rng);
      const bool present = w->MoveAt(key, deadline).ok();
      ASSERT_EQ(present, model.Move(key, CeilTick(deadline)));
    } else if (op < 75) {
      ASSERT_EQ(w->Remove(key), model.Remove(key));
    } else {
      // Advance: to the next due time, or by a drawn jump.
      if (rng() % 3 == 0 && w->NextDue() != TimePoint::max()) {
        now = std::max(now, w->NextDue());
      } else {
        now += DrawOffset(rng);
      }
      std::vector<std::pair<std::uint32_t, std::uint64_t>> fired;
      const auto record = [&](std::uint32_t k, std::uint64_t v) {
        fired.emplace_back(k, v);
      };
      if (kept_deadlines) {
        w->Advance(now, record, [&](const std::uint64_t& v) {
          auto it = kept.find(static_cast<std::uint32_t>(v % kKeySpace));
          return it == kept.end() ? TimePoint::min() : it->second;
        });
      } else {
        w->Advance(now, record);
      }
      // The model files a due timer again when its kept deadline is on a
      // later tick (none kept: 0, never later).
      const std::vector<testing::Fired> expected =
          model.AdvanceTo(FloorTick(now), [&](std::uint64_t v) {
            auto it = kept.find(static_cast<std::uint32_t>(v % kKeySpace));
            return it == kept.end() ? std::uint64_t{0} : CeilTick(it->second);
          });
      ASSERT_EQ(fired.size(), expected.size()) << "step " << step;
      // Same timers, and in deadline order: the model knows each one's tick.
      std::map<std::uint32_t, testing::Fired> by_key;
      for (const testing::Fired& f : expected) by_key[f.key] = f;
      std::uint64_t last_tick = 0;
      for (const auto& [k, v] : fired) {
        auto it = by_key.find(k);
        ASSERT_NE(it, by_key.end()) << "key " << k << " fired, step " << step;
        ASSERT_EQ(it->second.value, v);
        ASSERT_GE(it->second.tick, last_tick) << "out of deadline order";
        ASSERT_LE(TimeOf(it->second.tick), now) << "early";
        if (auto k = kept.find(it->first); k != kept.end()) {
          ASSERT_LE(k->second, TimeOf(it->second.tick))
              << "before its kept deadline";
        }
        last_tick = it->second.tick;
        by_key.erase(it);
      }
    }
    ASSERT_EQ(w->size(), model.size());
    ASSERT_EQ(w->DeadlineOf(key).has_value(),
              model.DeadlineOf(key).has_value());
    if (model.DeadlineOf(key).has_value()) {
      ASSERT_EQ(*w->DeadlineOf(key), TimeOf(*model.DeadlineOf(key)));
    }
    if (model.size() > 0) {
      ASSERT_LE(w->NextDue(), TimeOf(model.NextFireTick()));
    }
    if (step % 64 == 0) {
      ASSERT_TRUE(w->CheckInvariants().ok());
    }
  }
  // Whatever is left is handed back once.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> rest = w->TakeAll();
  std::sort(rest.begin(), rest.end());
  ASSERT_EQ(rest, model.TakeAll());
  ASSERT_TRUE(w->CheckInvariants().ok());
}

TEST(LocalWheelModel, FewKeysManyCollisionsOfDeadlines) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) RunProgram(seed, 2'000, 8);
}

TEST(LocalWheelModel, ManyKeysAcrossLevels) {
  for (std::uint64_t seed = 100; seed < 110; ++seed) {
    RunProgram(seed, 20'000, 2'000);
  }
}

TEST(LocalWheelModel, KeptDeadlinesFewKeys) {
  for (std::uint64_t seed = 200; seed <= 240; ++seed) {
    RunProgram(seed, 2'000, 8, /*kept_deadlines=*/true);
  }
}

TEST(LocalWheelModel, KeptDeadlinesManyKeysAcrossLevels) {
  for (std::uint64_t seed = 300; seed < 310; ++seed) {
    RunProgram(seed, 20'000, 2'000, /*kept_deadlines=*/true);
  }
}

}  // namespace local_wheel_model_test
}  // namespace timingwheel
