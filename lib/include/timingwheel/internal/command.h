// What a caller can ask of the loop.
#ifndef TIMINGWHEEL_INTERNAL_COMMAND_H_
#define TIMINGWHEEL_INTERNAL_COMMAND_H_

#include <cstdint>
#include <latch>
#include <type_traits>
#include <utility>
#include <vector>

#include "timingwheel/internal/manual_storage.h"
#include "timingwheel/internal/time_source.h"

namespace timingwheel {
namespace internal {

// Drain's hand-over: the loop fills `entries` and counts `taken` down.
// (TickRequest, the Tick command's, is in time_source.h.)
template <typename K, typename V>
struct DrainRequest {
  std::vector<std::pair<K, V>> entries;
  std::latch taken{1};
};

// One queued command. Key and value are constructed only for the kinds that
// carry them, so K and V need no default constructor; the queue's slots hold
// empty (kNone) commands. 32 bytes for 8-byte keys and values.
template <typename K, typename V>
class Command {
  // Declared first: the special members' requires-clauses use them.
  static constexpr bool kTrivial =
      std::is_trivially_copyable_v<K> && std::is_trivially_copyable_v<V>;
  static constexpr bool kNothrowMove =
      std::is_nothrow_move_constructible_v<K> &&
      std::is_nothrow_move_constructible_v<V>;

 public:
  enum class Kind : std::uint8_t {
    kNone,
    kSet,
    kMove,
    kRemove,
    kDrain,
    kTick,
    kStop
  };

  Command() = default;
  // For trivially copyable K and V (integers, PODs) a command is trivially
  // copyable too, so the queue moves it as 32 plain bytes rather than
  // through a switch on its kind at every hop (producer, block, batch).
  Command(Command&&) requires kTrivial = default;
  Command& operator=(Command&&) requires kTrivial = default;
  ~Command() requires kTrivial = default;
  Command(Command&& other) noexcept(kNothrowMove) requires(!kTrivial) {
    Take(other);
  }
  Command& operator=(Command&& other) noexcept(kNothrowMove) requires(
      !kTrivial) {
    if (this != &other) {
      Reset();
      Take(other);
    }
    return *this;
  }
  ~Command() requires(!kTrivial) { Reset(); }

  static Command Set(K key, V value, std::uint64_t deadline) {
    Command c(Kind::kSet);
    c.key_.Construct(std::move(key));
    c.value_.Construct(std::move(value));
    c.arg_.deadline = deadline;
    return c;
  }
  static Command Move(K key, std::uint64_t deadline) {
    Command c(Kind::kMove);
    c.key_.Construct(std::move(key));
    c.arg_.deadline = deadline;
    return c;
  }
  static Command Remove(K key) {
    Command c(Kind::kRemove);
    c.key_.Construct(std::move(key));
    return c;
  }
  static Command Drain(DrainRequest<K, V>* request) {
    Command c(Kind::kDrain);
    c.arg_.drain = request;
    return c;
  }
  static Command Tick(TickRequest* request) {
    Command c(Kind::kTick);
    c.arg_.tick = request;
    return c;
  }
  static Command Stop() { return Command(Kind::kStop); }

  Kind kind() const { return kind_; }
  // Set, Move and Remove count against Options::max_pending.
  bool counted() const { return HasKey(); }
  K& key() { return key_.Get(); }
  V& value() { return value_.Get(); }
  std::uint64_t deadline() const { return arg_.deadline; }
  DrainRequest<K, V>* drain() const { return arg_.drain; }
  TickRequest* tick() const { return arg_.tick; }

 private:
  explicit Command(Kind kind) : kind_(kind) {}

  bool HasKey() const {
    return kind_ == Kind::kSet || kind_ == Kind::kMove ||
           kind_ == Kind::kRemove;
  }
  bool HasValue() const { return kind_ == Kind::kSet; }

  void Reset() {
    if (HasKey()) key_.Destroy();
    if (HasValue()) value_.Destroy();
    kind_ = Kind::kNone;
  }
  // Leaves `other` empty.
  void Take(Command& other) {
    kind_ = other.kind_;
    arg_ = other.arg_;
    if (HasKey()) key_.Construct(std::move(other.key_.Get()));
    if (HasValue()) value_.Construct(std::move(other.value_.Get()));
    other.Reset();
  }

  Kind kind_ = Kind::kNone;
  union Arg {
    std::uint64_t deadline;
    DrainRequest<K, V>* drain;
    TickRequest* tick;
  } arg_{0};
  ManualStorage<K> key_;
  ManualStorage<V> value_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_COMMAND_H_
