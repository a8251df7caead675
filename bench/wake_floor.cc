// What the operating system charges for the part of a firing tick that no
// wheel can avoid, measured without the wheel: a thread sleeps until an
// absolute deadline on steady_clock (as the loop sleeps until its next due
// tick), wakes, and hands one item to a second thread waiting on a
// condition variable (as the loop hands fired timers to an execute worker).
// It prints the CPU time each thread used per wake-up, one JSON line per
// rate, so W6-spread's and W8's CPU per firing tick can be read against it.
//
//   wake_floor [--rates=231,1000] [--seconds=5] [--json] [--commit=<rev>]
//
// The rates default to W6-spread's firing ticks a second (1 M timers spread
// over an hour, ~N/3600 a second on distinct ticks, ~230 after collisions)
// and W8's (a timer due on every 1 ms tick).
#include <pthread.h>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "support/flags.h"
#include "support/json.h"
#include "support/results.h"

namespace {

using Clock = std::chrono::steady_clock;

double CpuSecondsOf(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Floor {
  std::int64_t wakes = 0;
  double sleeper_cpu = 0;  // seconds
  double worker_cpu = 0;   // seconds
  double seconds = 0;
};

// `rate` timed wake-ups a second for `seconds`, each handing one item to the
// worker. The worker waits for items with no timeout, as an execute worker
// does.
Floor Measure(double rate, double seconds) {
  std::mutex mu;
  std::condition_variable work;
  std::int64_t items = 0;  // guarded by mu
  bool stop = false;       // guarded by mu
  std::thread worker([&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work.wait(lock, [&] { return items > 0 || stop; });
      if (stop) return;
      items = 0;
    }
  });
  clockid_t worker_clock;
  pthread_getcpuclockid(worker.native_handle(), &worker_clock);

  Floor f;
  std::mutex sleep_mu;
  std::condition_variable never;  // only times out
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / rate));
  const double worker0 = CpuSecondsOf(worker_clock);
  const double cpu0 = CpuSecondsOf(CLOCK_THREAD_CPUTIME_ID);
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(seconds));
  for (Clock::time_point next = start + period; next <= end; next += period) {
    {
      std::unique_lock<std::mutex> lock(sleep_mu);
      while (Clock::now() < next) never.wait_until(lock, next);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ++items;
    }
    work.notify_one();
    ++f.wakes;
  }
  f.sleeper_cpu = CpuSecondsOf(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Let the worker take the last item before reading its clock.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  f.worker_cpu = CpuSecondsOf(worker_clock) - worker0;
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  work.notify_one();
  worker.join();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::string rates = "231,1000";
  double seconds = 5;
  bool json_only = false;
  std::string commit;
  support::Flags flags(
      "The OS's CPU cost of one timed wake-up plus one hand-off to a "
      "waiting thread, per wake, at the given rates.");
  flags.Add("rates", &rates, "wake-ups a second, comma-separated");
  flags.Add("seconds", &seconds, "measurement time per rate");
  flags.Add("json", &json_only, "print the JSON lines only");
  flags.Add("commit", &commit, "git revision to record in the results");
  flags.Parse(argc, argv);

  support::Json common;
  if (!commit.empty()) common.Add("commit", commit);
  const support::ResultLines results(json_only, common);
  for (absl::string_view r : absl::StrSplit(rates, ',')) {
    double rate = 0;
    if (!absl::SimpleAtod(r, &rate) || rate <= 0 || rate > 100000) {
      std::fprintf(stderr, "wake_floor: bad rate '%s'\n",
                   std::string(r).c_str());
      return 2;
    }
    const Floor f = Measure(rate, seconds > 0.1 ? seconds : 0.1);
    const double wakes = static_cast<double>(f.wakes);
    support::Json j;
    j.Add("workload", "wake_floor")
        .Add("name", absl::StrFormat("%.0f/s", rate))
        .Add("rate_per_s", rate)
        .Add("seconds", f.seconds)
        .Add("wakes", f.wakes)
        .Add("sleeper_cpu_us_per_wake", f.sleeper_cpu * 1e6 / wakes)
        .Add("worker_cpu_us_per_wake", f.worker_cpu * 1e6 / wakes)
        .Add("cpu_s_per_s", (f.sleeper_cpu + f.worker_cpu) / f.seconds);
    results.Print(
        j, absl::StrFormat("wake floor at %.0f wake-ups/s: sleeper %.1f us, "
                           "worker %.1f us of CPU a wake-up; %.5f CPU s/s",
                           rate, f.sleeper_cpu * 1e6 / wakes,
                           f.worker_cpu * 1e6 / wakes,
                           (f.sleeper_cpu + f.worker_cpu) / f.seconds));
  }
  return 0;
}
