// Number and duration formatting for the example, benchmark and soak
// programs' output. Shared by those programs only, not part of the installed
// library.
#ifndef TIMINGWHEEL_SUPPORT_FORMAT_H_
#define TIMINGWHEEL_SUPPORT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace support {

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

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_FORMAT_H_
