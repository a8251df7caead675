// Command-line flags for the example, benchmark and soak programs: the
// helpers in support/ are what those programs share, not part of the
// installed library. Deliberately tiny; a real program would use absl/flags.
#ifndef TIMINGWHEEL_SUPPORT_FLAGS_H_
#define TIMINGWHEEL_SUPPORT_FLAGS_H_

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace support {

// Parses --name=value and --name value for registered flags; a bare --name
// sets a bool flag to true. --help prints the usage and exits 0, a bad flag
// prints why and the usage and exits 2.
class Flags {
 public:
  explicit Flags(std::string summary) : summary_(std::move(summary)) {}

  // Registers --name for an integer, floating point, bool or string
  // variable; the variable's current value is the default.
  template <typename T>
  void Add(std::string name, T* value, std::string help) {
    Flag flag{std::move(name), std::move(help), "", std::is_same_v<T, bool>,
              [value](absl::string_view s) { return ParseValue(s, value); }};
    if constexpr (std::is_same_v<T, bool>) {
      flag.default_value = *value ? "true" : "false";
    } else {
      flag.default_value = absl::StrCat(*value);
    }
    flags_.push_back(std::move(flag));
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
        if (flag->is_bool) {
          flag->set("true");
          continue;
        }
        if (i + 1 >= argc) Fail(argv[0], "missing value for", argv[i]);
        value = argv[++i];
      }
      if (!flag->set(value)) Fail(argv[0], "bad value for", argv[i]);
    }
  }

 private:
  struct Flag {
    std::string name, help, default_value;
    bool is_bool;
    std::function<bool(absl::string_view)> set;
  };

  template <typename T>
  static bool ParseValue(absl::string_view s, T* value) {
    if constexpr (std::is_same_v<T, std::string>) {
      *value = std::string(s);
      return true;
    } else if constexpr (std::is_same_v<T, bool>) {
      return absl::SimpleAtob(s, value);
    } else if constexpr (std::is_floating_point_v<T>) {
      double d;
      if (!absl::SimpleAtod(s, &d)) return false;
      *value = static_cast<T>(d);
      return true;
    } else {
      if (absl::SimpleAtoi(s, value)) return true;
      // Also a whole number written as a float, so that --rate=2e5 works.
      double d;
      if (!absl::SimpleAtod(s, &d) || d != std::trunc(d) ||
          d < static_cast<double>(std::numeric_limits<T>::min()) ||
          d >= static_cast<double>(std::numeric_limits<T>::max())) {
        return false;
      }
      *value = static_cast<T>(d);
      return true;
    }
  }

  const Flag* Find(absl::string_view name) const {
    for (const Flag& f : flags_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  void PrintUsage(std::FILE* out, const char* program) const {
    absl::FPrintF(out, "%s\n\nUsage: %s [flags]\n\n", summary_, program);
    for (const Flag& f : flags_) {
      absl::FPrintF(out, "  --%-14s %s%s\n", f.name, f.help,
                    f.default_value.empty()
                        ? ""
                        : absl::StrCat(" (default ", f.default_value, ")"));
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

// What an --only=a,b flag selects: every name when the list is empty.
// Names compare without case.
class Selection {
 public:
  // Takes a comma-separated list; empty items are skipped.
  void Parse(absl::string_view list) {
    for (absl::string_view name :
         absl::StrSplit(list, ',', absl::SkipEmpty())) {
      names_.insert(absl::AsciiStrToLower(name));
    }
  }
  bool Wanted(absl::string_view name) const {
    return names_.empty() || names_.count(absl::AsciiStrToLower(name)) != 0;
  }

 private:
  std::set<std::string> names_;
};

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_FLAGS_H_
