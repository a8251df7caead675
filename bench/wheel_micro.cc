// Micro-benchmarks of the single-threaded core, timingwheel::internal::Wheel,
// with 8-byte keys and values: what one set / move / remove / fire / tick
// costs the loop thread, apart from the command queue and the threads.
//
// Each operation runs at two sizes: 1 Ki timers (everything in cache: the
// instruction cost) and 1 Mi timers (the W1-W7 size: mostly cache misses on
// the map and the entry). items_per_second is per operation; ns per
// operation = 1e9 / items_per_second (bench/table.py prints it).
//
// Deadlines are in ticks. The shapes follow the workloads: 512 slots and
// deadlines of 10..600 ticks (W1-W3 at 1 s), 128 slots and 50..150 ticks (W5
// at 1 ms), 512 slots and 1 hour at 1 ms (W6).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"
#include "support/rng.h"
#include "timingwheel/internal/wheel.h"

namespace {

using Core = timingwheel::internal::Wheel<std::uint64_t, std::uint64_t>;
using support::Mix;  // distinct, well-spread keys from indices
using support::Rng;

std::vector<std::uint64_t> Keys(std::size_t n) {
  std::vector<std::uint64_t> k(n);
  for (std::size_t i = 0; i < n; ++i) k[i] = Mix(i);
  return k;
}

// A random order of 0..n-1 (for remove) or n random picks (for moves),
// computed before timing so the timed loop only reads it sequentially.
std::vector<std::uint32_t> Picks(std::size_t n, bool permutation,
                                 std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::uint32_t> p(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = permutation ? static_cast<std::uint32_t>(i)
                       : static_cast<std::uint32_t>(rng.Below(n));
  }
  if (permutation) {
    for (std::size_t i = n - 1; i > 0; --i) {
      std::swap(p[i], p[rng.Below(i + 1)]);
    }
  }
  return p;
}

// The keys picked by `picks`, laid out in pick order, so that the timed loops
// read them sequentially: indexing the 8 MiB key array at random would add a
// cache miss of the benchmark's own to every operation.
std::vector<std::uint64_t> Gather(const std::vector<std::uint64_t>& keys,
                                  const std::vector<std::uint32_t>& picks) {
  std::vector<std::uint64_t> out(picks.size());
  for (std::size_t i = 0; i < picks.size(); ++i) out[i] = keys[picks[i]];
  return out;
}

std::unique_ptr<Core> Filled(const std::vector<std::uint64_t>& keys,
                             std::uint32_t slots, std::uint64_t lo,
                             std::uint64_t hi, std::uint64_t seed) {
  auto w = std::make_unique<Core>(slots);
  Rng rng(seed);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    w->Set(keys[i], i, lo + rng.Below(hi - lo + 1));
  }
  return w;
}

// Set of n distinct keys into an empty wheel, growth included (pool chunks,
// map rehashes), as W1 does.
void BM_Set(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  std::vector<std::uint64_t> deadlines(n);
  Rng rng(1);
  for (auto& d : deadlines) d = 10 + rng.Below(591);
  std::unique_ptr<Core> w;
  for (auto _ : state) {
    state.PauseTiming();
    w.reset();  // teardown of the previous pass is not timed
    w = std::make_unique<Core>(512);
    state.ResumeTiming();
    for (std::size_t i = 0; i < n; ++i) w->Set(keys[i], i, deadlines[i]);
    benchmark::DoNotOptimize(w->size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Set)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// SetTimer of a present key: replace the value and reschedule.
void BM_SetPresent(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  auto w = Filled(keys, 512, 10, 600, 1);
  const std::vector<std::uint64_t> picked = Gather(keys, Picks(n, false, 2));
  std::size_t j = 0;
  std::uint64_t deadline = 1 << 20;
  for (auto _ : state) {
    w->Set(picked[j], j, ++deadline);
    if (++j == n) j = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SetPresent)->Arg(1 << 10)->Arg(1 << 20);

// Move of a random present key to a later deadline: the lazy path, one probe
// and one write. Deadlines only grow, so every move is later.
void BM_MoveLater(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  auto w = Filled(keys, 512, 10, 600, 1);
  const std::vector<std::uint64_t> picked = Gather(keys, Picks(n, false, 3));
  std::size_t j = 0;
  std::uint64_t deadline = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(w->Move(picked[j], ++deadline));
    if (++j == n) j = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MoveLater)->Arg(1 << 10)->Arg(1 << 20);

// Move to an earlier deadline: probe, unlink, link into another slot.
// Deadlines only shrink (from far away), so every move is earlier.
void BM_MoveEarlier(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  constexpr std::uint64_t kFar = std::uint64_t{1} << 40;
  auto w = Filled(keys, 512, kFar, kFar + 1000, 1);
  const std::vector<std::uint64_t> picked = Gather(keys, Picks(n, false, 4));
  std::size_t j = 0;
  std::uint64_t deadline = kFar - 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(w->Move(picked[j], --deadline));
    if (++j == n) j = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MoveEarlier)->Arg(1 << 10)->Arg(1 << 20);

// W2's mix: random present keys to random deadlines in [10, 600] ticks,
// about half earlier, half later.
void BM_MoveRandom(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  auto w = Filled(keys, 512, 10, 600, 1);
  const std::vector<std::uint64_t> picked = Gather(keys, Picks(n, false, 5));
  std::vector<std::uint64_t> deadlines(n);
  Rng rng(6);
  for (auto& d : deadlines) d = 10 + rng.Below(591);
  std::size_t j = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(w->Move(picked[j], deadlines[j]));
    if (++j == n) j = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MoveRandom)->Arg(1 << 10)->Arg(1 << 20);

// Remove every key of a full wheel in random order.
void BM_Remove(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  const std::vector<std::uint64_t> order = Gather(keys, Picks(n, true, 7));
  std::unique_ptr<Core> w;
  for (auto _ : state) {
    state.PauseTiming();
    w = Filled(keys, 512, 10, 600, 1);
    state.ResumeTiming();
    for (std::size_t i = 0; i < n; ++i) w->Remove(order[i]);
    benchmark::DoNotOptimize(w->size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Remove)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// Expire: W5's shape (128 slots, deadlines 50..150 ticks); AdvanceTo(150)
// fires all n. Per fired timer, the sink being a plain sum.
void BM_Expire(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  std::unique_ptr<Core> w;
  std::uint64_t sum = 0;
  for (auto _ : state) {
    state.PauseTiming();
    w = Filled(keys, 128, 50, 150, 1);
    state.ResumeTiming();
    w->AdvanceTo(150, [&](std::uint64_t, std::uint64_t&& k, std::uint64_t&& v) {
      sum += k ^ v;
    });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Expire)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// One tick, AdvanceTo(now + 1), of a 512-slot wheel holding range(0) timers
// that are all far away (2^32 ticks: W6's "due in 1 hour" and beyond, so
// that they never come due however many iterations run). What an idle tick
// costs when the loop does wake up.
void BM_TickFar(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  constexpr std::uint64_t kFar = std::uint64_t{1} << 32;
  auto w = Filled(Keys(n), 512, kFar, kFar + 1000, 1);
  std::uint64_t fired = 0;
  for (auto _ : state) {
    w->AdvanceTo(w->now() + 1, [&](std::uint64_t, std::uint64_t&&,
                                   std::uint64_t&&) { ++fired; });
  }
  state.counters["fired"] = static_cast<double>(fired);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TickFar)->Arg(0)->Arg(1 << 20);

// One tick of a 512-slot wheel holding 1 Mi timers spread uniformly over the
// next 3.6 M ticks (an hour at 1 ms): each slot holds ~2 Ki entries of
// later rotations, which a tick walks whenever the slot has one due in this
// rotation (the go-zero "circle" cost). Fired timers are set again an hour
// out so the population stays at n.
void BM_TickSpread(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  constexpr std::uint64_t kHour = 3600 * 1000;
  auto w = Filled(Keys(n), 512, 1, kHour, 1);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> refill;
  std::uint64_t fired = 0;
  for (auto _ : state) {
    w->AdvanceTo(w->now() + 1,
                 [&](std::uint64_t, std::uint64_t&& k, std::uint64_t&& v) {
                   refill.emplace_back(k, v);
                 });
    fired += refill.size();
    for (auto& [k, v] : refill) w->Set(k, v, w->now() + kHour);
    refill.clear();
  }
  state.counters["fired"] = static_cast<double>(fired);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TickSpread)->Arg(1 << 20);

// The floor under every command: one random lookup in an absl flat map of
// 8-byte keys (peers.md: "about 80 ns at 1 M keys").
void BM_MapFind(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::vector<std::uint64_t> keys = Keys(n);
  absl::flat_hash_map<std::uint64_t, std::uint32_t> map;
  for (std::size_t i = 0; i < n; ++i) map[keys[i]] = i;
  const std::vector<std::uint64_t> picked = Gather(keys, Picks(n, false, 8));
  std::size_t j = 0;
  for (auto _ : state) {
    auto it = map.find(picked[j]);
    benchmark::DoNotOptimize(it == map.end() ? 0u : it->second);
    if (++j == n) j = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MapFind)->Arg(1 << 10)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
