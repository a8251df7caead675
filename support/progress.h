// A live status line for the example programs. Shared by the example,
// benchmark and soak programs only, not part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_PROGRESS_H_
#define TIMINGWHEEL_SUPPORT_PROGRESS_H_

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace support {

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

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_PROGRESS_H_
