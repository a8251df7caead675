// Small helpers shared by the examples: --flag=value parsing, a monotonic
// clock, number formatting and a progress line that works with and without a
// terminal. Deliberately tiny; a real program would use absl/flags.
#ifndef TIMINGWHEEL_EXAMPLES_EXAMPLE_UTIL_H_
#define TIMINGWHEEL_EXAMPLES_EXAMPLE_UTIL_H_

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace examples {

// Parses --name=value and --name value for registered flags; --help prints
// the usage and exits 0, a bad flag prints why and exits 2.
class Flags {
 public:
  explicit Flags(std::string summary) : summary_(std::move(summary)) {}

  // Registers --name for an integer, floating point or bool variable; the
  // variable's current value is the default.
  template <typename T>
  void Add(std::string name, T* value, std::string help) {
    std::function<bool(absl::string_view)> set;
    if constexpr (std::is_same_v<T, bool>) {
      set = [value](absl::string_view s) { return absl::SimpleAtob(s, value); };
    } else if constexpr (std::is_floating_point_v<T>) {
      set = [value](absl::string_view s) {
        double d;
        if (!absl::SimpleAtod(s, &d)) return false;
        *value = static_cast<T>(d);
        return true;
      };
    } else {
      set = [value](absl::string_view s) { return absl::SimpleAtoi(s, value); };
    }
    flags_.push_back({std::move(name), std::move(help), absl::StrCat(*value),
                      std::move(set)});
  }

  void Parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      absl::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        PrintUsage(stdout, argv[0]);
        std::exit(0);
      }
      if (arg.substr(0, 2) != "--") Fail(argv[0], "unexpected argument", arg);
      arg.remove_prefix(2);
      absl::string_view name = arg, value;
      bool has_value = false;
      if (const auto eq = arg.find('='); eq != absl::string_view::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_value = true;
      }
      const Flag* flag = Find(name);
      if (flag == nullptr) Fail(argv[0], "unknown flag", argv[i]);
      if (!has_value) {
        // A bare --flag means "true" for bools and "take the next arg" else.
        if (flag->set("true")) continue;
        if (i + 1 >= argc) Fail(argv[0], "missing value for", argv[i]);
        value = argv[++i];
      }
      if (!flag->set(value)) Fail(argv[0], "bad value for", argv[i]);
    }
  }

 private:
  struct Flag {
    std::string name, help, default_value;
    std::function<bool(absl::string_view)> set;
  };

  const Flag* Find(absl::string_view name) const {
    for (const Flag& f : flags_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  void PrintUsage(std::FILE* out, const char* program) const {
    absl::FPrintF(out, "%s\n\nUsage: %s [flags]\n\n", summary_, program);
    for (const Flag& f : flags_) {
      absl::FPrintF(out, "  --%-14s %s (default %s)\n", f.name, f.help,
                    f.default_value);
    }
  }

  [[noreturn]] void Fail(const char* program, absl::string_view what,
                         absl::string_view arg) const {
    absl::FPrintF(stderr, "%s: %s %s\n\n", program, what, arg);
    PrintUsage(stderr, program);
    std::exit(2);
  }

  std::string summary_;
  std::vector<Flag> flags_;
};

// Monotonic nanoseconds. The wheel measures deadlines on steady_clock too, so
// comparing against it never mixes clocks (absl::Now() is wall time and may
// be slewed).
inline std::int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// 1234567 -> "1,234,567".
inline std::string WithCommas(std::uint64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// 2412345.0 -> "2.41M".
inline std::string Human(double n) {
  if (n >= 1e9) return absl::StrFormat("%.2fG", n / 1e9);
  if (n >= 1e6) return absl::StrFormat("%.2fM", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

// A duration as milliseconds with one decimal: "5.2ms".
inline std::string Ms(absl::Duration d) {
  return absl::StrFormat("%.1fms", absl::ToDoubleMilliseconds(d));
}

// One live status line. On a terminal it is redrawn in place several times a
// second; piped into a file or CI log it becomes one line per second, since
// '\r' redraws would pile up into an unreadable single line there.
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(fileno(stdout)) != 0) {}

  // How often the caller should refresh.
  absl::Duration period() const {
    return tty_ ? absl::Milliseconds(250) : absl::Seconds(1);
  }

  void Show(const std::string& line) {
    if (tty_) {
      absl::PrintF("\r%s\033[K", line);  // \033[K clears the old line's tail
    } else {
      absl::PrintF("%s\n", line);
    }
    std::fflush(stdout);
  }

  // Ends the redrawn line so the next output starts on a fresh one.
  void Done() {
    if (tty_) absl::PrintF("\n");
    std::fflush(stdout);
  }

 private:
  const bool tty_;
};

}  // namespace examples

#endif  // TIMINGWHEEL_EXAMPLES_EXAMPLE_UTIL_H_
