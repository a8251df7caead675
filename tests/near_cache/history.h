// The coherence checker of the near cache's tests: a history of the writes
// Redis took and the values reads returned, each with the real-time window
// of its call, and the reads no moment of Redis's history explains.
#ifndef TIMINGWHEEL_TESTS_NEAR_CACHE_HISTORY_H_
#define TIMINGWHEEL_TESTS_NEAR_CACHE_HISTORY_H_

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace near_cache {

class History {
 public:
  using Value = std::optional<std::string>;  // nullopt: no such key

  // A write of `value` to `key` that took effect somewhere in [start, end].
  // Each key has one writer at a time, and records its writes in order.
  // Every key starts as nil.
  void Wrote(const std::string& key, Value value, absl::Time start,
             absl::Time end) {
    std::lock_guard lock(mu_);
    writes_[key].push_back({std::move(value), start, end});
  }

  // A read of `key` that returned `value`, called at start, returned at end.
  void Read(const std::string& key, Value value, absl::Time start,
            absl::Time end) {
    std::lock_guard lock(mu_);
    reads_.push_back({key, std::move(value), start, end});
  }

  std::size_t reads() const {
    std::lock_guard lock(mu_);
    return reads_.size();
  }

  // Every read whose value Redis held at no moment of [start - delay, end]:
  // write i's value may have been Redis's from write i's start until write
  // i+1's end (each took effect somewhere within its call), so a read is
  // explained when some write of its value began before the read returned
  // and the next write ended no earlier than `delay` before the read began.
  // `delay` is how late an invalidation may be applied; zero once the test
  // has waited for it.
  std::vector<std::string> Violations(absl::Duration delay) const {
    std::lock_guard lock(mu_);
    // Per key, where each value was written (index -1: the initial nil).
    absl::flat_hash_map<std::string,
                        absl::flat_hash_map<Value, std::vector<int>>>
        where;
    for (const auto& [key, ws] : writes_) {
      auto& by_value = where[key];
      by_value[kNil].push_back(-1);
      for (int i = 0; i < static_cast<int>(ws.size()); ++i) {
        by_value[ws[i].value].push_back(i);
      }
    }
    std::vector<std::string> found;
    static const std::vector<Write> kNone;
    static const std::vector<int> kInitial = {-1};
    for (const ReadRecord& r : reads_) {
      auto it = writes_.find(r.key);
      const std::vector<Write>& ws = it == writes_.end() ? kNone : it->second;
      const std::vector<int>* candidates = nullptr;
      if (it == writes_.end()) {
        if (!r.value.has_value()) candidates = &kInitial;
      } else {
        const auto& by_value = where.at(r.key);
        if (auto c = by_value.find(r.value); c != by_value.end()) {
          candidates = &c->second;
        }
      }
      bool explained = false;
      static const std::vector<int> kEmpty;
      for (int i : candidates == nullptr ? kEmpty : *candidates) {
        const absl::Time from = i < 0 ? absl::InfinitePast() : ws[i].start;
        const absl::Time until = i + 1 < static_cast<int>(ws.size())
                                     ? ws[i + 1].end
                                     : absl::InfiniteFuture();
        if (from <= r.end && until >= r.start - delay) {
          explained = true;
          break;
        }
      }
      if (!explained) {
        found.push_back(absl::StrCat(
            "read of ", r.key, " returned ", r.value.value_or("(nil)"),
            ", which Redis did not hold from ", absl::FormatDuration(delay),
            " before the read until it returned (", ws.size(),
            " writes of the key)"));
      }
    }
    return found;
  }

 private:
  struct Write {
    Value value;
    absl::Time start, end;
  };
  struct ReadRecord {
    std::string key;
    Value value;
    absl::Time start, end;
  };
  static inline const Value kNil = std::nullopt;

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Write>> writes_;  // by mu_
  std::vector<ReadRecord> reads_;                                // by mu_
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_TESTS_NEAR_CACHE_HISTORY_H_
