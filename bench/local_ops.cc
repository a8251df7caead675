// W1-W4 (docs/peers.md) on a LocalWheel, as a server's own loop runs it:
// one thread sets, moves and removes N keyed uint64_t timers (delays uniform
// in [10 s, 600 s], keys in random order), calling Advance(now) every 1,024
// calls as a loop turn would. Nothing is faulted in ahead: run each in a
// fresh process (bench/local_run.sh does) for the figure a service gets
// after a deploy; --warm runs the same workload once first on the same
// wheel for the second column.
//
// Prints one JSON line: CPU ns per set (W1), per move (W2), per remove (W3),
// with the loop turns' share, and the RSS and the wheel's own bytes per
// timer (W4).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <vector>

#include "support/clock.h"
#include "support/flags.h"
#include "support/json.h"
#include "support/memory.h"
#include "support/rng.h"
#include "timingwheel/local_wheel.h"

namespace {

using Wheel = timingwheel::LocalWheel<std::uint64_t, std::uint64_t>;

// The time read at the last loop turn (--turn_time).
Wheel::TimePoint g_turn = Wheel::Clock::now();

struct Phase {
  double cpu_s = 0;
  double loop_cpu_s = 0;  // in Advance
};

// Runs fn(i) for i in order, with an Advance every 1,024 calls.
template <typename Fn>
Phase Run(Wheel& w, const std::vector<std::uint64_t>& order, Fn&& fn) {
  Phase p;
  const double start = support::ThreadCpuSeconds();
  std::uint64_t fired = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    fn(order[i]);
    if ((i & 1023) == 1023) {
      const double t = support::ThreadCpuSeconds();
      g_turn = Wheel::Clock::now();
      fired += w.Advance(g_turn, [](std::uint64_t, std::uint64_t) {});
      p.loop_cpu_s += support::ThreadCpuSeconds() - t;
    }
  }
  p.cpu_s = support::ThreadCpuSeconds() - start;
  if (fired != 0) std::fprintf(stderr, "local_ops: %llu fired early?\n",
                               static_cast<unsigned long long>(fired));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int timers = 1'000'000;
  bool warm = false;
  bool turn_time = false;
  support::Flags flags("local_ops: W1-W4 on a LocalWheel, on one thread");
  flags.Add("timers", &timers, "keyed timers");
  flags.Add("warm", &warm, "run the workload once before measuring");
  flags.Add("turn_time", &turn_time,
            "SetAt/MoveAt from the time read at each loop turn (as ratas, "
            "libevent and libuv count delays: a timer may then fire up to a "
            "turn early) instead of a clock read per call");
  flags.Parse(argc, argv);

  support::Rng rng(42);
  const auto n = static_cast<std::size_t>(timers);
  std::vector<std::uint64_t> keys(n), order(n), delays_ms(n), moves_ms(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = rng.Next();
    delays_ms[i] = static_cast<std::uint64_t>(rng.Between(10'000, 600'000));
    moves_ms[i] = static_cast<std::uint64_t>(rng.Between(10'000, 600'000));
  }
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  // The inputs in the order they are used, so the harness streams through
  // them: a server's key arrives with its request, already in cache, and
  // a random read of these arrays would be a cache miss the wheel is not
  // to blame for.
  // Moves and removes come in other random orders than the sets: a
  // connection's requests do not arrive in the order connections opened.
  std::vector<std::uint64_t> set_keys(n), set_ms(n), move_keys(n), move_ms(n),
      remove_keys(n), by_order(n);
  for (std::size_t j = 0; j < n; ++j) {
    set_keys[j] = keys[order[j]];
    set_ms[j] = delays_ms[order[j]];
  }
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  for (std::size_t j = 0; j < n; ++j) {
    move_keys[j] = keys[order[j]];
    move_ms[j] = moves_ms[order[j]];
  }
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  for (std::size_t j = 0; j < n; ++j) remove_keys[j] = keys[order[j]];
  std::iota(by_order.begin(), by_order.end(), 0);

  const std::int64_t rss0 = support::RssBytes();
  auto w = *Wheel::Create({.interval = absl::Milliseconds(10)});
  auto set = [&](std::uint64_t j) {
    if (turn_time) {
      (void)w->SetAt(set_keys[j], j,
                     g_turn + std::chrono::milliseconds(set_ms[j]));
    } else {
      (void)w->Set(set_keys[j], j, std::chrono::milliseconds(set_ms[j]));
    }
  };
  auto move = [&](std::uint64_t j) {
    if (turn_time) {
      (void)w->MoveAt(move_keys[j],
                      g_turn + std::chrono::milliseconds(move_ms[j]));
    } else {
      (void)w->Move(move_keys[j], std::chrono::milliseconds(move_ms[j]));
    }
  };
  auto remove = [&](std::uint64_t j) { w->Remove(remove_keys[j]); };
  if (warm) {
    Run(*w, by_order, set);
    Run(*w, by_order, move);
    Run(*w, by_order, remove);
  }
  const Phase w1 = Run(*w, by_order, set);
  const std::int64_t rss1 = support::RssBytes();
  const std::size_t own = w->MemoryBytes();
  const Phase w2 = Run(*w, by_order, move);
  const Phase w3 = Run(*w, by_order, remove);

  auto ns = [&](double s) { return s * 1e9 / static_cast<double>(n); };
  support::Json j;
  j.Add("wheel", "LocalWheel")
      .Add("timers", timers)
      .Add("warm", warm ? 1 : 0)
      .Add("turn_time", turn_time ? 1 : 0)
      .Add("set_ns", ns(w1.cpu_s))
      .Add("set_loop_ns", ns(w1.loop_cpu_s))
      .Add("move_ns", ns(w2.cpu_s))
      .Add("move_loop_ns", ns(w2.loop_cpu_s))
      .Add("remove_ns", ns(w3.cpu_s))
      .Add("remove_loop_ns", ns(w3.loop_cpu_s))
      .Add("rss_bytes_per_timer",
           static_cast<double>(rss1 - rss0) / static_cast<double>(n))
      .Add("own_bytes_per_timer",
           static_cast<double>(own) / static_cast<double>(n));
  std::printf("%s\n", j.str().c_str());
  return 0;
}
