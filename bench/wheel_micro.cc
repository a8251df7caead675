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
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"
#include "support/memory.h"
#include "support/rng.h"
#include "timingwheel/internal/loop/apply_pipeline.h"
#include "timingwheel/internal/loop/command.h"
#include "timingwheel/internal/wheel/wheel.h"

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

// Page faults this thread has taken so far (first touches of memory).
std::int64_t ThreadPageFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt + u.ru_majflt;
}

// The loop's longest stop while n distinct keys are set into an empty wheel
// without Reserve (Options::expected_timers unset), the key index growing
// as it must: the sets go in batches of 256, the loop's batch, each key's
// index line prefetched 16 sets ahead as the apply pipeline does, and every
// batch is timed. max_batch_us is the longest batch of the pass (index
// growth, pool chunks and page faults included), batches_over_1ms how many
// took longer than 1 ms, page_faults how many first touches of memory the
// pass took (telling the growth's own work from the memory system's);
// items_per_second is the whole pass.
//
// range(1), memory: 0 cold; 1 warm, as bench/workloads runs (1 GiB of heap
// faulted in first by support::PrefaultHeap, which also keeps blocks below
// 32 MiB in malloc's heap); 2 warm with transparent huge pages off for the
// pass. Where fresh memory is slow to back (a VM), the first touch of a
// 2 MiB page the process has not used stops the thread, and khugepaged
// collapsing an advised block stops a thread touching it for as long
// (rarely, at random): 2 shows what is left without either. Cold runs
// first, since the warm setting stays for the rest of the process.
// range(2) = 1 reserves n first: no index growth, the control.
void BM_SetPause(benchmark::State& state) {
  constexpr std::size_t kBatch = 256;
  constexpr std::size_t kAhead = 16;
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const std::int64_t memory = state.range(1);
  static bool prefaulted = false;
  if (memory != 0 && !prefaulted) {
    support::PrefaultHeap(1024);
    prefaulted = true;
  }
  const std::vector<std::uint64_t> keys = Keys(n);
  std::vector<std::uint64_t> deadlines(n);
  Rng rng(1);
  for (auto& d : deadlines) d = 10 + rng.Below(591);
  std::unique_ptr<Core> w;
  double max_batch_ns = 0;
  std::int64_t over_1ms = 0;
  std::int64_t faults = 0;
  for (auto _ : state) {
    state.PauseTiming();
    w.reset();
    if (memory == 2) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    w = std::make_unique<Core>(512);
    if (state.range(2) != 0) w->Reserve(n);
    const std::int64_t faults_before = ThreadPageFaults();
    state.ResumeTiming();
    for (std::size_t b = 0; b < n; b += kBatch) {
      const std::size_t e = std::min(n, b + kBatch);
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t i = b; i < std::min(e, b + kAhead); ++i) {
        w->PrefetchIndex(w->HashOf(keys[i]));
      }
      for (std::size_t i = b; i < e; ++i) {
        if (i + kAhead < e) w->PrefetchIndex(w->HashOf(keys[i + kAhead]));
        w->Set(keys[i], i, deadlines[i], w->HashOf(keys[i]));
      }
      const auto end = std::chrono::steady_clock::now();
      const double ns = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - start)
              .count());
      max_batch_ns = std::max(max_batch_ns, ns);
      over_1ms += ns > 1e6;
    }
    benchmark::DoNotOptimize(w->size());
    state.PauseTiming();
    faults += ThreadPageFaults() - faults_before;
    w.reset();
    if (memory == 2) prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    state.ResumeTiming();
  }
  state.counters["max_batch_us"] = max_batch_ns / 1e3;
  state.counters["batches_over_1ms"] = static_cast<double>(over_1ms);
  state.counters["page_faults"] = static_cast<double>(faults);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_SetPause)
    ->ArgNames({"n", "memory", "reserved"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int memory : {0, 1, 2}) {  // cold first: see above
        for (int reserved : {0, 1}) {
          for (int n : {1 << 20, 1 << 22}) b->Args({n, memory, reserved});
        }
      }
    })
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

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

// The timed parts of BM_Expire and BM_Pipeline, kept out of line under names
// of their own so that bench/instructions.sh can count their instructions
// alone (valgrind --toggle-collect), without the set-up around them.
[[gnu::noinline]] std::uint64_t TimedExpire(Core& w, std::uint64_t to) {
  std::uint64_t sum = 0;
  w.AdvanceTo(to, [&](std::uint64_t, std::uint64_t&& k, std::uint64_t&& v) {
    sum += k ^ v;
  });
  return sum;
}

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
    sum += TimedExpire(*w, 150);
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
// rotation (what a single-level wheel that counts rotations per entry
// pays). Fired timers are set again an hour out so the population stays at
// n.
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

// The loop's apply stage alone: n commands of one kind, built before the
// clock starts, applied in batches of ApplyPipeline::kBatch through the
// pipeline, as the loop applies what it takes off the queue, but without
// the queue and the threads. This is the loop's cost per command at its
// best (full batches); the workloads' loop_cpu_ns_per_op adds the queue,
// rounds that find few commands, and everything else the loop does.
// range(1): 0 set of n new keys into a wheel reserved for n, 1 move of
// random present keys to random deadlines in [10, 600] ticks (W2b), 2
// remove of every key in random order (W3b), 3 set of n new keys into an
// empty wheel, the key index growing as it must (W1b).
using Command = timingwheel::internal::Command<std::uint64_t, std::uint64_t>;
using Pipeline =
    timingwheel::internal::ApplyPipeline<std::uint64_t, std::uint64_t,
                                         absl::Hash<std::uint64_t>,
                                         std::equal_to<std::uint64_t>>;

// Applies `commands` in the loop's batches. See TimedExpire.
[[gnu::noinline]] void TimedApply(Pipeline& pipeline,
                                  std::vector<Command>& commands,
                                  timingwheel::Stats& counts) {
  const std::size_t n = commands.size();
  for (std::size_t b = 0; b < n; b += Pipeline::kBatch) {
    pipeline.Apply(commands.data() + b, std::min(Pipeline::kBatch, n - b),
                   counts, [](Command&) {});
  }
}

void BM_Pipeline(benchmark::State& state) {
  using Cmd = Command;
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  const int kind = static_cast<int>(state.range(1));
  const std::vector<std::uint64_t> keys = Keys(n);
  std::vector<Cmd> commands(n);
  std::unique_ptr<Core> w;
  timingwheel::Stats counts;
  for (auto _ : state) {
    state.PauseTiming();
    w.reset();
    if (kind == 0 || kind == 3) {
      w = std::make_unique<Core>(512);
      if (kind == 0) w->Reserve(n);
    } else {
      w = Filled(keys, 512, 10, 600, 1);
    }
    Rng rng(9);
    const std::vector<std::uint32_t> picks = Picks(n, kind == 2, 10);
    for (std::size_t i = 0; i < n; ++i) {
      switch (kind) {
        case 0:
        case 3:
          commands[i] =
              Cmd::Set(keys[i], i, 10 + rng.Below(591), w->HashOf(keys[i]));
          break;
        case 1:
          commands[i] = Cmd::Move(keys[picks[i]], 10 + rng.Below(591),
                                  w->HashOf(keys[picks[i]]));
          break;
        default:
          commands[i] = Cmd::Remove(keys[picks[i]], w->HashOf(keys[picks[i]]));
          break;
      }
    }
    Pipeline pipeline(w.get());
    state.ResumeTiming();
    TimedApply(pipeline, commands, counts);
    benchmark::DoNotOptimize(w->size());
  }
  state.counters["applied"] = static_cast<double>(counts.applied);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Pipeline)
    ->ArgNames({"n", "kind"})
    ->Args({1 << 20, 0})
    ->Args({1 << 20, 1})
    ->Args({1 << 20, 2})
    ->Args({1 << 20, 3})
    ->Unit(benchmark::kMillisecond);

// The floor under every command: one random lookup in an absl flat map of
// 8-byte keys (docs/design.md, "The memory system sets the cost").
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
