// How the explorer picks the thread that takes the next step (scheduler.h):
//
//  - DfsStrategy: every schedule with at most `max_preemptions`
//    preemptions (switching away from a thread that could go on), depth
//    first, by replaying a prefix of choices and varying the last one that
//    has an alternative left (stateless model checking, as CHESS and loom
//    do). Exhaustive within the bound; the bound keeps small cases small,
//    and most concurrency bugs need only one or two preemptions.
//  - PctStrategy: random priorities, lowered at `depth - 1` random steps
//    (Burckhardt et al., "A randomized scheduler with probabilistic
//    guarantees of finding bugs", ASPLOS 2010): a bug of depth d shows in a
//    run with probability at least 1 / (n k^(d-1)) for n threads and k
//    steps, for cases too large to enumerate.
//  - ReplayStrategy: the choices a failing schedule printed.
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_STRATEGIES_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_STRATEGIES_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "scheduler.h"

namespace timingwheel {
namespace explore {

// The enabled threads at `p` in the order a depth-first search tries them:
// the current thread first (no preemption), then the others by number;
// after a spin, round robin from the spinning thread, so that two threads
// waiting on each other's waits cannot starve the one they wait for.
inline std::vector<int> Candidates(const ChoicePoint& p) {
  std::vector<int> out;
  if (p.current_enabled) out.push_back(p.current);
  const int first = p.spin ? p.current + 1 : 0;
  for (int k = 0; k < kMaxThreads; ++k) {
    const int i = (first + k) % kMaxThreads;
    if ((p.enabled & (1u << i)) != 0 && i != p.current) out.push_back(i);
  }
  return out;
}

inline bool IsPreemption(const ChoicePoint& p, int chosen) {
  return p.current_enabled && chosen != p.current;
}

class DfsStrategy : public Strategy {
 public:
  explicit DfsStrategy(int max_preemptions)
      : max_preemptions_(max_preemptions) {}

  void BeginSchedule(int threads) override {
    static_cast<void>(threads);
    points_.clear();
    preemptions_ = 0;
  }

  int Choose(const ChoicePoint& p) override {
    const std::vector<int> candidates = Candidates(p);
    const std::size_t k = points_.size();
    int chosen = candidates.front();
    if (k < prefix_.size() && std::find(candidates.begin(), candidates.end(),
                                        prefix_[k]) != candidates.end()) {
      chosen = prefix_[k];
    } else if (k < prefix_.size()) {
      diverged_ = true;  // the replay took another path: not deterministic
    }
    points_.push_back({p, chosen, preemptions_});
    if (IsPreemption(p, chosen)) ++preemptions_;
    return chosen;
  }

  // After a schedule: sets up the next one; false once every schedule
  // within the bound has run.
  bool Advance() {
    for (std::size_t k = points_.size(); k-- > 0;) {
      const Point& point = points_[k];
      // After a spin the next thread is the round robin's: branching there
      // would let two spinning threads hand the baton to each other for
      // ever, and reorders nothing a preemption elsewhere cannot.
      if (point.p.spin) continue;
      const std::vector<int> candidates = Candidates(point.p);
      auto it = std::find(candidates.begin(), candidates.end(), point.chosen);
      for (++it; it != candidates.end(); ++it) {
        if (IsPreemption(point.p, *it) &&
            point.preemptions_before >= max_preemptions_) {
          continue;
        }
        prefix_.clear();
        for (std::size_t j = 0; j < k; ++j) {
          prefix_.push_back(points_[j].chosen);
        }
        prefix_.push_back(*it);
        return true;
      }
    }
    return false;
  }

  // Whether a replayed prefix met a choice point where its choice was not
  // enabled: the schedule is not a function of the choices.
  bool diverged() const { return diverged_; }

 private:
  struct Point {
    ChoicePoint p;
    int chosen;
    int preemptions_before;
  };
  const int max_preemptions_;
  std::vector<int> prefix_;
  std::vector<Point> points_;
  int preemptions_ = 0;
  bool diverged_ = false;
};

class PctStrategy : public Strategy {
 public:
  // `steps`: about how many choice points a schedule has, where the
  // priority changes fall.
  PctStrategy(std::uint64_t seed, int depth, int steps)
      : rng_(seed), depth_(depth), steps_(std::max(steps, 1)) {}

  void BeginSchedule(int threads) override {
    priority_.assign(kMaxThreads, 0);
    std::vector<int> order(threads);
    for (int i = 0; i < threads; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    // Initial priorities above every changed one (which are < depth).
    for (int i = 0; i < threads; ++i) priority_[order[i]] = depth_ + i;
    lowest_ = 0;
    change_at_.clear();
    std::uniform_int_distribution<int> at(1, steps_);
    for (int j = 0; j + 1 < depth_; ++j) change_at_.push_back(at(rng_));
  }

  int Choose(const ChoicePoint& p) override {
    // A spinning thread waits for the others: it goes below all of them,
    // or a higher one spinning on a lower one's progress would starve it.
    if (p.spin) priority_[p.current] = --lowest_;
    for (std::size_t j = 0; j < change_at_.size(); ++j) {
      if (change_at_[j] == p.index && p.current >= 0) {
        priority_[p.current] = static_cast<int>(j);  // below the initial ones
      }
    }
    int best = -1;
    for (int i = 0; i < kMaxThreads; ++i) {
      if ((p.enabled & (1u << i)) == 0) continue;
      if (best < 0 || priority_[i] > priority_[best]) best = i;
    }
    return best;
  }

 private:
  std::mt19937_64 rng_;
  const int depth_;
  const int steps_;
  std::vector<int> priority_;
  std::vector<int> change_at_;
  int lowest_ = 0;  // the last priority a spinning thread was given
};

class ReplayStrategy : public Strategy {
 public:
  explicit ReplayStrategy(std::vector<int> choices)
      : choices_(std::move(choices)) {}
  void BeginSchedule(int threads) override {
    static_cast<void>(threads);
    next_ = 0;
  }
  int Choose(const ChoicePoint& p) override {
    if (next_ < choices_.size()) return choices_[next_++];
    return Candidates(p).front();
  }

 private:
  std::vector<int> choices_;
  std::size_t next_ = 0;
};

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_STRATEGIES_H_
