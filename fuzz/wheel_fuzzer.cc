// libFuzzer target: decodes the input into a program of Wheel operations
// (tests/wheel/wheel_model.h, the same decoder the unit tests replay) and
// runs it against the naive model, checking the wheel's CheckInvariants()
// after every operation, with uint32_t keys and again with string keys
// (StringKeyedWheel: held in place and on the heap). Any divergence or broken
// invariant aborts with a description; ASan/UBSan catch memory and lifetime
// errors (values are unique_ptrs, so a double destroy or a leak is reported
// too).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "wheel_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  // Long inputs mostly repeat what short ones cover and slow every run.
  const timingwheel::testing::Program program =
      timingwheel::testing::Decode(data, size, /*max_ops=*/2048);
  using timingwheel::testing::RunDifferential;
  using timingwheel::testing::StringKeyedWheel;
  for (const std::string& err :
       {RunDifferential(program), RunDifferential<StringKeyedWheel>(program)}) {
    if (!err.empty()) {
      std::fprintf(stderr, "wheel/model divergence: %s\n", err.c_str());
      std::abort();
    }
  }
  return 0;
}
