// A deliberately naive model of internal::Wheel, an op-sequence decoder and a
// differential runner, shared by wheel_model_test.cc and fuzz/wheel_fuzzer.cc
// so that the unit tests replay exactly what the fuzzer explores.
#ifndef TIMINGWHEEL_TESTS_WHEEL_WHEEL_MODEL_H_
#define TIMINGWHEEL_TESTS_WHEEL_WHEEL_MODEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/wheel/wheel.h"

namespace timingwheel {
namespace testing {

using internal::kMaxTick;
using internal::kNever;

// One timer firing: (tick, key, value id).
struct Fired {
  std::uint64_t tick;
  std::uint32_t key;
  std::uint64_t value;
  friend bool operator==(const Fired&, const Fired&) = default;
  friend bool operator<(const Fired& a, const Fired& b) {
    return std::tie(a.tick, a.key, a.value) < std::tie(b.tick, b.key, b.value);
  }
};

// The obvious specification: a map key -> (deadline, value). Advancing to t
// fires everything with deadline <= t, each at its own deadline tick. The
// same timers are also kept ordered by (deadline, key), so that advancing
// and finding the next firing cost what fires, not a walk of every timer
// (tests with 100,000 timers advance thousands of times).
class WheelModel {
 public:
  std::uint64_t now() const { return now_; }
  std::size_t size() const { return timers_.size(); }

  std::uint64_t Clamp(std::uint64_t deadline) const {
    return std::min(std::max(deadline, now_ + 1), kMaxTick);
  }

  bool Set(std::uint32_t key, std::uint64_t value, std::uint64_t deadline) {
    const bool present = Remove(key);
    deadline = Clamp(deadline);
    timers_[key] = {deadline, value};
    by_deadline_.insert({deadline, key});
    return present;
  }

  bool Move(std::uint32_t key, std::uint64_t deadline) {
    auto it = timers_.find(key);
    if (it == timers_.end()) return false;
    by_deadline_.erase({it->second.first, key});
    it->second.first = Clamp(deadline);
    by_deadline_.insert({it->second.first, key});
    return true;
  }

  bool Remove(std::uint32_t key) {
    auto it = timers_.find(key);
    if (it == timers_.end()) return false;
    by_deadline_.erase({it->second.first, key});
    timers_.erase(it);
    return true;
  }

  std::optional<std::uint64_t> DeadlineOf(std::uint32_t key) const {
    auto it = timers_.find(key);
    if (it == timers_.end()) return std::nullopt;
    return it->second.first;
  }

  // The exact tick of the next firing, kNever when empty.
  std::uint64_t NextFireTick() const {
    return by_deadline_.empty() ? kNever : by_deadline_.begin()->first;
  }

  // Returns what fires in (now, target], sorted by (tick, key).
  std::vector<Fired> AdvanceTo(std::uint64_t target) {
    return AdvanceTo(target, [](std::uint64_t) { return std::uint64_t{0}; });
  }
  // The same with kept deadlines: a timer due at d whose kept(value) tick
  // is after d is due then instead (and asked again then).
  template <typename Kept>
  std::vector<Fired> AdvanceTo(std::uint64_t target, Kept&& kept) {
    target = std::min(target, kMaxTick);
    std::vector<Fired> fired;
    if (target <= now_) return fired;
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= target) {
      const auto [deadline, key] = *by_deadline_.begin();
      by_deadline_.erase(by_deadline_.begin());
      auto it = timers_.find(key);
      const std::uint64_t later =
          std::min<std::uint64_t>(kept(it->second.second), kMaxTick);
      if (later > deadline) {
        it->second.first = later;
        by_deadline_.emplace(later, key);
        continue;
      }
      fired.push_back({deadline, key, it->second.second});
      timers_.erase(it);
    }
    std::sort(fired.begin(), fired.end());
    now_ = target;
    return fired;
  }

  // Every pending (key, value), sorted.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> TakeAll() {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> all;
    for (const auto& [key, t] : timers_) all.emplace_back(key, t.second);
    timers_.clear();
    by_deadline_.clear();
    return all;
  }

 private:
  std::uint64_t now_ = 0;
  std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> timers_;
  std::set<std::pair<std::uint64_t, std::uint32_t>> by_deadline_;
};

// A hash whose quality the op stream chooses, so collisions (of the full hash
// and of the 32-bit folded hash the wheel stores) are exercised too.
struct SwitchableHash {
  enum Mode : std::uint8_t { kGood, kConstant, kFoldCollides };
  Mode mode = kGood;
  std::size_t operator()(std::uint32_t key) const {
    switch (mode) {
      case kConstant:
        return 42;
      case kFoldCollides:
        // h ^ (h >> 32) is 0 for every key: distinct full hashes, one folded.
        return (std::uint64_t{key} << 32) | key;
      case kGood:
      default:
        return absl::Hash<std::uint32_t>()(key);
    }
  }
};

enum class OpKind : std::uint8_t {
  kSet,
  kMove,
  kRemove,
  kAdvance,
  kTakeAll,
  kCascade,
};

struct Op {
  OpKind kind;
  std::uint32_t key = 0;
  // kSet/kMove: the deadline is `base + delta`, where base is now() unless
  // `absolute` (then base is 0, which lands in the past once time has moved).
  // kAdvance: the target is now() + delta, or delta if `absolute` (the
  // decoder never makes those: they are for hand-written programs).
  std::uint64_t delta = 0;
  bool absolute = false;
};

struct Program {
  std::uint32_t num_slots = 1;
  // Slots of each level above level 0: 2 or 4 make every few ticks a level
  // boundary, so cascades happen all the time.
  std::uint32_t level_slots = 64;
  SwitchableHash::Mode hash_mode = SwitchableHash::kGood;
  std::vector<Op> ops;
};

// Reads bytes as a program. Every byte string decodes to something valid;
// running out of bytes just ends the program. Keys come from a small set
// (with a few values that look like the wheel's internal link sentinels), so
// sets, moves and removes keep hitting present keys.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size)
      : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  std::uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint64_t Bytes(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | Byte();
    return v;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

inline constexpr std::uint32_t kOddKeys[] = {0xFFFFFFFFu, 0x80000000u,
                                             0x7FFFFFFFu, 4096};

inline std::uint32_t DecodeKey(std::uint8_t b) {
  b &= 15;
  return b < 12 ? b : kOddKeys[b - 12];
}

// A deadline or advance distance: mostly within a few rotations, sometimes
// far (circles, big jumps), sometimes past kMaxTick.
inline std::uint64_t DecodeDelta(ByteReader& r, std::uint32_t num_slots) {
  const std::uint8_t b = r.Byte();
  const std::uint64_t n = num_slots;
  switch (b >> 5) {
    case 0:
    case 1:
    case 2:
      return (b & 31) % (3 * n + 2);  // 0 = in the past (clamped)
    case 3:
      return r.Byte() % (20 * n + 1);
    case 4:
      return r.Bytes(2);
    case 5:
      return r.Bytes(4);
    case 6:
      return (b & 1) ? kMaxTick - (b & 15) : kNever - (b & 15);
    case 7:
    default:
      if (b & 16) {
        // Around a power of two: a level boundary, whatever the level sizes
        // (1, 2 or 3 times 2^k, less 0 or 1).
        const int shift = r.Byte() % 63;
        return (std::uint64_t{1} << shift) * (1 + (b & 3) % 3) - ((b >> 2) & 1);
      }
      return r.Bytes(1) * n + (b & 7);  // multiples of the rotation
  }
}

inline Program Decode(const std::uint8_t* data, std::size_t size,
                      std::size_t max_ops = 4096) {
  ByteReader r(data, size);
  Program p;
  const std::uint8_t header = r.Byte();
  p.num_slots = (header & 15) + 1;
  if (header & 0x80) p.num_slots = 1 + r.Byte() * 4;  // up to 1021 slots
  const int mode = (header >> 4) & 7;
  p.hash_mode = static_cast<SwitchableHash::Mode>(mode % 3);
  constexpr std::uint32_t kLevelSlots[] = {2, 4, 64};
  p.level_slots = kLevelSlots[mode / 3];
  while (!r.empty() && p.ops.size() < max_ops) {
    const std::uint8_t b = r.Byte();
    Op op;
    op.key = DecodeKey(b);
    switch (b >> 4) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        op.kind = OpKind::kSet;
        op.absolute = (b >> 4) == 4;
        op.delta = DecodeDelta(r, p.num_slots);
        break;
      case 5:
      case 6:
      case 7:
      case 8:
      case 9:
        op.kind = OpKind::kMove;
        op.absolute = (b >> 4) == 9;
        op.delta = DecodeDelta(r, p.num_slots);
        break;
      case 10:
        op.kind = OpKind::kRemove;
        break;
      case 11:
      case 12:
        op.kind = OpKind::kAdvance;
        op.delta = 1 + (b & 31) % p.num_slots;  // within a rotation
        break;
      case 13:
        op.kind = OpKind::kAdvance;
        op.delta = 1 + r.Byte() % (4 * p.num_slots);  // a few rotations
        break;
      case 14: {
        // Big jumps, rarely all the way to the end of time (which leaves
        // nothing more to explore in the rest of the program).
        op.kind = OpKind::kAdvance;
        const std::uint8_t k = b & 15;
        if (k < 12) {
          op.delta = 1 + r.Bytes(3);
        } else if (k < 15) {
          op.delta = r.Bytes(5);
        } else {
          const std::uint8_t far = r.Byte();
          op.delta = far == 0xFF ? kNever : r.Bytes(7);
        }
        break;
      }
      case 15:
      default:
        // TakeAll rare, since it empties the wheel; Cascade with a budget of
        // 1 to 4, so draining slots are left half moved between advances.
        op.kind = (b & 15) == 15  ? OpKind::kTakeAll
                  : (b & 15) >= 8 ? OpKind::kCascade
                                  : OpKind::kRemove;
        op.delta = 1 + (b & 3);
        break;
    }
    p.ops.push_back(op);
  }
  return p;
}

using ModelWheel =
    internal::Wheel<std::uint32_t, std::unique_ptr<std::uint64_t>,
                    SwitchableHash>;

// ModelWheel's interface over a Wheel with std::string keys, so that the
// same programs exercise string keys held in place (InlineString) and on
// the heap: key k is the string of its digits padded with 'x' to
// (7 k) % 61 + 1 characters or more, so that keys 0-11 (DecodeKey) are
// 1 to 57 characters long, either side of InlineString::kCapacity (43). The
// hash is SwitchableHash of the number the string starts with, so the programs'
// collision modes still hold; equality stays std::equal_to<std::string>,
// which is what makes the wheel hold the key inline.
class StringKeyedWheel {
 public:
  struct Hash {
    SwitchableHash inner;
    std::size_t operator()(const std::string& key) const {
      return inner(static_cast<std::uint32_t>(std::stoul(key)));
    }
  };
  using W = internal::Wheel<std::string, std::unique_ptr<std::uint64_t>, Hash>;

  StringKeyedWheel(std::uint32_t num_slots, SwitchableHash hash,
                   std::equal_to<std::uint32_t>, std::uint32_t level_slots)
      : w_(num_slots, Hash{hash}, std::equal_to<std::string>(), level_slots) {}

  static std::string KeyOf(std::uint32_t k) {
    std::string s = std::to_string(k);
    s.resize(
        std::max<std::size_t>(s.size() + 1, (std::uint64_t{7} * k) % 61 + 1),
        'x');
    return s;
  }
  static std::uint32_t Number(const std::string& key) {
    return static_cast<std::uint32_t>(std::stoul(key));
  }

  std::uint64_t now() const { return w_.now(); }
  std::size_t size() const { return w_.size(); }
  std::uint64_t NextDueTick() const { return w_.NextDueTick(); }
  std::size_t removed_in_lists() const { return w_.removed_in_lists(); }
  std::uint32_t num_slots() const { return w_.num_slots(); }
  bool Set(std::uint32_t k, std::unique_ptr<std::uint64_t> v, std::uint64_t d) {
    return w_.Set(KeyOf(k), std::move(v), d);
  }
  bool Move(std::uint32_t k, std::uint64_t d) { return w_.Move(KeyOf(k), d); }
  bool Remove(std::uint32_t k) { return w_.Remove(KeyOf(k)); }
  std::optional<std::uint64_t> DeadlineOf(std::uint32_t k) const {
    return w_.DeadlineOf(KeyOf(k));
  }
  // Sinks get the key as the model's number, after checking that the
  // characters came back whole.
  template <typename S, typename Kept>
  void AdvanceTo(std::uint64_t t, S&& s, Kept&& kept) {
    w_.AdvanceTo(
        t,
        [&](std::uint64_t tick, W::StoredKey&& key,
            std::unique_ptr<std::uint64_t>&& value) {
          std::uint32_t k = Whole(W::Store::Take(key));
          s(tick, std::move(k), std::move(value));
        },
        kept);
  }
  bool Cascade(std::size_t budget) { return w_.Cascade(budget); }
  template <typename S>
  void TakeAll(S&& s) {
    w_.TakeAll([&](W::StoredKey&& key, std::unique_ptr<std::uint64_t>&& value) {
      std::uint32_t k = Whole(W::Store::Take(key));
      s(std::move(k), std::move(value));
    });
  }
  absl::Status CheckInvariants() const { return w_.CheckInvariants(); }

 private:
  // The number of a key handed out, or another (so that the comparison
  // with the model fails) if its characters changed.
  static std::uint32_t Whole(const std::string& key) {
    const std::uint32_t k = Number(key);
    return key == KeyOf(k) ? k : ~k;
  }

  W w_;
};

// Runs `program` on a Wheel and on WheelModel in lockstep. Returns "" when
// they agree throughout and the wheel's CheckInvariants() passes after every
// operation, else a description of the first divergence or broken
// invariant. V is a unique_ptr so that ASan/LSan catch any value destroyed
// twice or leaked.
// W is ModelWheel or a stand-in with the same interface (the harness's own
// test plants a bug through one).
template <typename W = ModelWheel>
std::string RunDifferential(const Program& program) {
  SwitchableHash hash;
  hash.mode = program.hash_mode;
  W wheel(program.num_slots, hash, std::equal_to<std::uint32_t>(),
          program.level_slots);
  WheelModel model;
  std::uint64_t next_value = 1;
  // Kept deadlines (AdvanceTo's `kept`), by value: a fixed share of the
  // values gets one when set, from the value's number and the deadline
  // asked for: later within a few rotations of level 0, later across
  // levels, or earlier (which must change nothing).
  std::unordered_map<std::uint64_t, std::uint64_t> kept_tick;
  const auto keep = [&](std::uint64_t v, std::uint64_t deadline) {
    if (deadline >= kMaxTick) return;
    const std::uint64_t mix = v / 8;
    switch (v % 8) {
      case 0:
        kept_tick[v] = deadline + 1 + mix % (3 * program.num_slots);
        break;
      case 1:
        kept_tick[v] = deadline + mix % 300'000;
        break;
      case 2:
        kept_tick[v] = deadline - std::min<std::uint64_t>(deadline, 1 + v % 5);
        break;
      default:
        break;
    }
  };
  const auto kept_of = [&](std::uint64_t v) noexcept {
    const auto it = kept_tick.find(v);
    return it == kept_tick.end() ? std::uint64_t{0} : it->second;
  };
  std::ostringstream err;
  auto fail = [&](std::size_t step, const std::string& what) {
    err << "op #" << step << " (num_slots=" << program.num_slots
        << ", level_slots=" << program.level_slots
        << ", hash_mode=" << int{program.hash_mode} << ", now=" << model.now()
        << "): " << what;
    return err.str();
  };
  auto check_key = [&](std::size_t step,
                       std::uint32_t key) -> std::optional<std::string> {
    if (wheel.DeadlineOf(key) != model.DeadlineOf(key)) {
      std::ostringstream s;
      s << "DeadlineOf(" << key
        << ") = " << wheel.DeadlineOf(key).value_or(kNever) << ", model "
        << model.DeadlineOf(key).value_or(kNever);
      return fail(step, s.str());
    }
    return std::nullopt;
  };

  for (std::size_t step = 0; step < program.ops.size(); ++step) {
    const Op& op = program.ops[step];
    const std::uint64_t base = op.absolute ? 0 : model.now();
    // Saturate rather than wrap: the wheel's contract is about deadlines
    // as given, and base + delta must not overflow into the past.
    const std::uint64_t deadline =
        op.delta > kNever - base ? kNever : base + op.delta;
    switch (op.kind) {
      case OpKind::kSet: {
        const std::uint64_t v = next_value++;
        keep(v, deadline);
        const bool w =
            wheel.Set(op.key, std::make_unique<std::uint64_t>(v), deadline);
        if (w != model.Set(op.key, v, deadline)) {
          return fail(step, "Set returned " + std::to_string(w));
        }
        if (auto e = check_key(step, op.key)) return *e;
        break;
      }
      case OpKind::kMove: {
        const bool w = wheel.Move(op.key, deadline);
        if (w != model.Move(op.key, deadline)) {
          return fail(step, "Move returned " + std::to_string(w));
        }
        if (auto e = check_key(step, op.key)) return *e;
        break;
      }
      case OpKind::kRemove: {
        const bool w = wheel.Remove(op.key);
        if (w != model.Remove(op.key)) {
          return fail(step, "Remove returned " + std::to_string(w));
        }
        if (auto e = check_key(step, op.key)) return *e;
        break;
      }
      case OpKind::kAdvance: {
        const std::uint64_t from = model.now();
        const std::uint64_t target = op.absolute ? op.delta
                                     : op.delta > kNever - from
                                         ? kNever
                                         : from + op.delta;
        std::vector<Fired> got;
        std::string order_error;
        wheel.AdvanceTo(
            target,
            [&](std::uint64_t tick, std::uint32_t&& key,
                std::unique_ptr<std::uint64_t>&& value) {
              if (!got.empty() && tick < got.back().tick &&
                  order_error.empty()) {
                order_error =
                    "fired out of tick order at tick " + std::to_string(tick);
              }
              got.push_back({tick, key, value ? *value : 0});
              // The wheel destroys what the sink leaves behind; take it here
              // so that both paths (moved out, left in place) are exercised.
              if (key & 1) {
                std::unique_ptr<std::uint64_t> taken = std::move(value);
              }
            },
            [&](const auto&,
                const std::unique_ptr<std::uint64_t>& value) noexcept {
              return kept_of(*value);
            });
        if (!order_error.empty()) return fail(step, order_error);
        std::sort(got.begin(), got.end());
        const std::vector<Fired> want = model.AdvanceTo(target, kept_of);
        if (got != want) {
          std::ostringstream s;
          s << "AdvanceTo(" << target << ") fired {";
          for (const Fired& f : got) {
            s << " (t=" << f.tick << " k=" << f.key << " v=" << f.value << ")";
          }
          s << " }, model {";
          for (const Fired& f : want) {
            s << " (t=" << f.tick << " k=" << f.key << " v=" << f.value << ")";
          }
          s << " }";
          return fail(step, s.str());
        }
        break;
      }
      case OpKind::kCascade:
        wheel.Cascade(op.delta);  // moves timers between levels only
        break;
      case OpKind::kTakeAll: {
        std::vector<std::pair<std::uint32_t, std::uint64_t>> got;
        wheel.TakeAll(
            [&](std::uint32_t&& key, std::unique_ptr<std::uint64_t>&& value) {
              got.emplace_back(key, value ? *value : 0);
            });
        std::sort(got.begin(), got.end());
        if (got != model.TakeAll()) return fail(step, "TakeAll differs");
        break;
      }
    }
    if (const absl::Status s = wheel.CheckInvariants(); !s.ok()) {
      return fail(step, "CheckInvariants: " + std::string(s.message()));
    }
    if (wheel.now() != model.now()) {
      return fail(step, "now() = " + std::to_string(wheel.now()));
    }
    if (wheel.size() != model.size()) {
      return fail(step, "size() = " + std::to_string(wheel.size()) +
                            ", model " + std::to_string(model.size()));
    }
    // NextDueTick may be early (a stale bound), never late, never in the
    // past, and kNever exactly when empty and no removed entry waits in a
    // list. Those wait on level 0 only: their slot is due within two of its
    // rotations.
    const std::uint64_t due = wheel.NextDueTick();
    const std::uint64_t want_due = model.NextFireTick();
    const bool waiting = wheel.removed_in_lists() != 0;
    // (At now() == kMaxTick a timer can only be set for now() itself: it
    // never fires, and no tick after now() is due.)
    const bool at_end = model.now() >= kMaxTick;
    if ((!at_end && (due > want_due || (due != kNever && due <= model.now()) ||
                     (waiting && due > model.now() + 2 * wheel.num_slots()))) ||
        (want_due == kNever && !waiting) != (due == kNever)) {
      return fail(step, "NextDueTick() = " + std::to_string(due) +
                            ", next fire " + std::to_string(want_due));
    }
  }
  return "";
}

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_WHEEL_WHEEL_MODEL_H_
