// Printing benchmark results: one JSON line per result, each saying where
// and when it was measured, so that results files from different days and
// machines can be compared. Shared by the example, benchmark and soak
// programs only, not part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_RESULTS_H_
#define TIMINGWHEEL_SUPPORT_RESULTS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <utility>

#include "support/json.h"

namespace support {

// The 1-minute load average: how busy the machine was besides us.
inline double Load1() {
  double load = 0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

// {"cores":N,"cpu":"<model name from /proc/cpuinfo>"}.
inline Json MachineJson() {
  std::string model = "unknown";
  if (std::FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "model name", 10) != 0) continue;
      if (const char* colon = std::strchr(line, ':')) {
        model = colon + (colon[1] == ' ' ? 2 : 1);
        model.erase(model.find_last_not_of('\n') + 1);
      }
      break;
    }
    std::fclose(f);
  }
  Json machine;
  machine
      .Add("cores",
           static_cast<std::int64_t>(std::thread::hardware_concurrency()))
      .Add("cpu", model);
  return machine;
}

// Now in UTC, as 2026-01-31T23:59:59Z.
inline std::string UtcDate() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

// Prints results. Each JSON line is the result's own fields, then load1,
// machine and date, then the program's `common` fields (its flags worth
// recording). Unless json_only, a human-readable line starting with "# "
// comes before each JSON line.
class ResultLines {
 public:
  ResultLines(bool json_only, Json common)
      : json_only_(json_only),
        common_(std::move(common)),
        machine_(MachineJson()),
        date_(UtcDate()) {}

  void Print(Json result, const std::string& human) const {
    result.Add("load1", Load1())
        .Add("machine", machine_)
        .Add("date", date_)
        .Append(common_);
    if (!json_only_) std::printf("# %s\n", human.c_str());
    std::printf("%s\n", result.str().c_str());
    std::fflush(stdout);
  }

 private:
  const bool json_only_;
  const Json common_;
  const Json machine_;
  const std::string date_;  // when the program started: one run, one date
};

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_RESULTS_H_
