// Checks of the library's invariants: TW_DCHECK for the O(1) ones on hot
// paths, compiled out of release builds; TW_INVARIANT and TW_DCHECK_OK for
// the CheckInvariants() walks that tests and checking builds run.
#ifndef TIMINGWHEEL_INTERNAL_BASE_CHECK_H_
#define TIMINGWHEEL_INTERNAL_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// TIMINGWHEEL_DCHECK_IS_ON: 1 where TW_DCHECK checks. That is every build
// without NDEBUG (Meson's debug and debugoptimized, the default here), and
// any build that defines TIMINGWHEEL_CHECK_INVARIANTS (Meson option
// -Dinvariants=true, which the sanitizer runs of ./run test set). Release
// builds (-Db_ndebug=true, as the benchmarks are built) neither evaluate
// nor pay for a check.
#if !defined(NDEBUG) || defined(TIMINGWHEEL_CHECK_INVARIANTS)
#define TIMINGWHEEL_DCHECK_IS_ON 1
#else
#define TIMINGWHEEL_DCHECK_IS_ON 0
#endif

namespace timingwheel {
namespace internal {

// What a failed check does: names the place and the condition (and what
// the failing CheckInvariants reported, if any) on stderr, then aborts.
// Out of line and cold, so a check costs its caller a compare and a branch.
[[noreturn]] ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD inline void
CheckFailed(const char* file, int line, const char* condition,
            const std::string& detail = std::string()) {
  std::fprintf(stderr, "%s:%d: timingwheel check failed: %s%s%s\n", file,
               line, condition, detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal
}  // namespace timingwheel

// TW_DCHECK(condition): aborts with file:line and the condition unless it
// holds, where TIMINGWHEEL_DCHECK_IS_ON; elsewhere the condition is compiled
// (so it stays valid code) but never evaluated. Only for conditions that
// cost O(1) and have no side effects.
#if TIMINGWHEEL_DCHECK_IS_ON
#define TW_DCHECK(condition)                                              \
  (ABSL_PREDICT_TRUE(condition)                                           \
       ? static_cast<void>(0)                                             \
       : ::timingwheel::internal::CheckFailed(__FILE__, __LINE__, #condition))
#else
#define TW_DCHECK(condition) \
  (false ? static_cast<void>(condition) : static_cast<void>(0))
#endif

// TW_DCHECK_OK(status): the same for an absl::Status, such as a
// CheckInvariants() result; the failure names the status's message.
#if TIMINGWHEEL_DCHECK_IS_ON
#define TW_DCHECK_OK(status)                                               \
  do {                                                                     \
    const ::absl::Status tw_dcheck_status = (status);                      \
    if (ABSL_PREDICT_FALSE(!tw_dcheck_status.ok())) {                      \
      ::timingwheel::internal::CheckFailed(                                \
          __FILE__, __LINE__, #status,                                     \
          std::string(tw_dcheck_status.message()));                        \
    }                                                                      \
  } while (false)
#else
#define TW_DCHECK_OK(status)             \
  do {                                   \
    if (false) static_cast<void>(status); \
  } while (false)
#endif

// TW_INVARIANT(condition, what...): inside a function returning
// absl::Status (a CheckInvariants()), returns an Internal error unless the
// condition holds. Its message is absl::StrCat(what...), which should name
// the structure and the values involved, followed by the condition.
// Active in every build: CheckInvariants() runs only where it is called.
// The message is built in a lambda of its own, out of line, so that the
// checking function's frame holds none of StrCat's temporaries: under ASan
// each of those would cost poisoning on every call, failing or not. The
// lambda runs at once, on the caller's thread and under the caller's locks,
// which -Wthread-safety cannot see into a lambda: it is exempt, its reads
// being the caller's, which the analysis checks there. (Under clang 14 a
// lambda cannot name a structured binding: bind members to variables.)
#define TW_INVARIANT(condition, ...)                                      \
  do {                                                                    \
    if (ABSL_PREDICT_FALSE(!(condition))) {                               \
      return [&]() ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD            \
                 ABSL_NO_THREAD_SAFETY_ANALYSIS {                         \
                   return ::absl::InternalError(                          \
                       ::absl::StrCat(__VA_ARGS__, " [", #condition, "]")); \
                 }();                                                     \
    }                                                                     \
  } while (false)

// TW_RETURN_IF_ERROR(status): returns a failed absl::Status from the
// enclosing function (a CheckInvariants() calling its parts' ones).
#define TW_RETURN_IF_ERROR(status)                                        \
  do {                                                                    \
    ::absl::Status tw_return_status = (status);                           \
    if (ABSL_PREDICT_FALSE(!tw_return_status.ok())) {                     \
      return tw_return_status;                                            \
    }                                                                     \
  } while (false)

#endif  // TIMINGWHEEL_INTERNAL_BASE_CHECK_H_
