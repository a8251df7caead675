// What one explored schedule did through the public Cache API, and the
// checks on it. Only the thread holding the scheduler's baton records, so
// the clock is a plain counter that orders every call's start and end and
// every listener call as they happened.
//
// Values are numbers (a value's id), unique per schedule, so a value names
// the write that stored it.
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_HISTORY_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_HISTORY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace explore {

struct Call {
  enum class Kind { kSet, kDelete, kGet, kGetOrLoad };
  Kind kind = Kind::kGet;
  int thread = -1;  // -1: the setup, before the schedule
  std::uint64_t key = 0;
  std::uint64_t value = 0;  // a Set's value; a Get's or GetOrLoad's result
  bool found = false;       // a Get or GetOrLoad had a value; Delete's result
  bool ok = true;           // a Set's or GetOrLoad's status
  std::int64_t begin = 0;
  std::int64_t end = 0;
  // A GetOrLoad whose load() ran: what it loaded, and when load() ran.
  std::optional<std::uint64_t> loaded;
  std::int64_t load_begin = 0;
  std::int64_t load_end = 0;
};

struct Heard {
  std::uint64_t key;
  std::uint64_t value;
  RemovalCause cause;
  std::int64_t at;
};

class History {
 public:
  std::int64_t Now() { return ++clock_; }

  // A call that starts now. The reference stays valid (a deque).
  Call& Begin(Call::Kind kind, int thread, std::uint64_t key) {
    Call& call = calls_.emplace_back();
    call.kind = kind;
    call.thread = thread;
    call.key = key;
    call.begin = Now();
    return call;
  }
  void End(Call& call) { call.end = Now(); }

  void Listener(std::uint64_t key, std::uint64_t value, RemovalCause cause) {
    heard_.push_back(Heard{key, value, cause, Now()});
  }

  const std::deque<Call>& calls() const { return calls_; }
  const std::vector<Heard>& heard() const { return heard_; }

  // Each Get returned what its key held at some moment during the call (a
  // register's linearizability): a value, or nothing, written by a write
  // that began before the Get ended, and not overwritten by a write that
  // both began after that write ended and ended before the Get began.
  // Deletes write "nothing", as does a key's absence before any write.
  // And no Get returns a value whose removal the listener heard before the
  // Get began (heard inside the removing call, which may not have ended).
  std::string CheckGets() const {
    for (const Call& get : calls_) {
      if (get.kind != Call::Kind::kGet) continue;
      for (const Heard& h : heard_) {
        if (get.found && h.value == get.value && h.at < get.begin) {
          return absl::StrCat("T", get.thread, "'s Get(", get.key, ") at [",
                              get.begin, ", ", get.end, "] returned ",
                              get.value, ", whose removal the listener heard",
                              " at ", h.at);
        }
      }
      bool explained = false;
      bool written_before = false;
      for (const Call& w : calls_) {
        if (w.key != get.key || !IsWrite(w)) continue;
        if (w.begin < get.begin) written_before = true;
        if (!Writes(w, get) || w.begin >= get.end) continue;
        if (!Overwritten(w, get)) {
          explained = true;
          break;
        }
      }
      if (!explained && !get.found && !written_before) explained = true;
      if (!explained) {
        return absl::StrCat("T", get.thread, "'s Get(", get.key, ") at [",
                            get.begin, ", ", get.end, "] returned ",
                            get.found ? absl::StrCat(get.value) : "nothing",
                            ", which the key did not hold during the call");
      }
    }
    return "";
  }

  // Every value stored leaves exactly once: the listener hears it once, or
  // it is the key's value at the end (`final`), not both; and the listener
  // hears only values stored, with their own key.
  std::string CheckExactlyOnce(
      const std::map<std::uint64_t, std::optional<std::uint64_t>>& final)
      const {
    std::map<std::uint64_t, std::uint64_t> key_of;  // value -> key
    for (const Call& c : calls_) {
      if (c.kind == Call::Kind::kSet && c.ok) key_of[c.value] = c.key;
      if (c.loaded) key_of[*c.loaded] = c.key;
    }
    std::map<std::uint64_t, int> left;
    for (const Heard& h : heard_) {
      auto it = key_of.find(h.value);
      if (it == key_of.end()) {
        return absl::StrCat("the listener heard value ", h.value,
                            ", never stored");
      }
      if (it->second != h.key) {
        return absl::StrCat("the listener heard value ", h.value, " with key ",
                            h.key, ", not ", it->second);
      }
      ++left[h.value];
    }
    for (const auto& [key, value] : final) {
      if (value) ++left[*value];
    }
    for (const auto& [value, key] : key_of) {
      const int n = left[value];
      if (n != 1) {
        const auto f = final.find(key);
        const bool present =
            f != final.end() && f->second && *f->second == value;
        return absl::StrCat("value ", value, " of key ", key, " left ",
                            n - present, " time(s) through the listener",
                            present ? " and is still present" : "",
                            n == 0 ? " (lost)" : "");
      }
    }
    return "";
  }

 private:
  static bool IsWrite(const Call& c) {
    return (c.kind == Call::Kind::kSet && c.ok) ||
           c.kind == Call::Kind::kDelete;
  }
  // Whether write w stores what `get` returned.
  static bool Writes(const Call& w, const Call& get) {
    if (w.kind == Call::Kind::kDelete) return !get.found;
    return get.found && w.value == get.value;
  }
  // Whether another write of the key followed w entirely and ended before
  // `get` began.
  bool Overwritten(const Call& w, const Call& get) const {
    for (const Call& later : calls_) {
      if (&later == &w || later.key != get.key || !IsWrite(later)) continue;
      if (later.begin > w.end && later.end < get.begin) return true;
    }
    return false;
  }

  std::int64_t clock_ = 0;
  std::deque<Call> calls_;
  std::vector<Heard> heard_;
};

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_HISTORY_H_
