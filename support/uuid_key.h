// String keys as services have them, for the benchmark programs: a UUID's
// text form. Shared by bench/ only, not part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_UUID_KEY_H_
#define TIMINGWHEEL_SUPPORT_UUID_KEY_H_

#include <malloc.h>

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "support/rng.h"

namespace support {

// A UUID's text form, 36 characters of lowercase hex and dashes
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"), from a counter mixed through
// Mix: distinct counters give distinct keys, spread like real ids. The
// string's capacity is exactly 36, as a copy's would be, so the key owns
// one malloc chunk of 37 bytes' worth whether it is this string or a copy.
inline std::string UuidKey(std::uint64_t i) {
  const std::uint64_t hi = Mix(i);
  const std::uint64_t lo = Mix(hi ^ 0x5DEECE66Dull);
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                "-%012" PRIx64,
                hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                lo & std::uint64_t{0xFFFFFFFFFFFF});
  return std::string(buf, 36);
}

// The heap bytes a std::string key owns when it is held as a std::string:
// its buffer's malloc chunk, the usable size plus glibc's 8-byte header
// (48 B for a 36-character key). 0 for a key in the small-string buffer.
inline std::int64_t StringHeapBytes(const std::string& key) {
  if (key.capacity() < 16) return 0;  // libstdc++'s small-string buffer
  return static_cast<std::int64_t>(
      malloc_usable_size(const_cast<char*>(key.data())) + sizeof(std::size_t));
}

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_UUID_KEY_H_
