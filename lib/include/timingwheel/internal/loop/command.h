// What a caller can ask of the loop.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_COMMAND_H_
#define TIMINGWHEEL_INTERNAL_LOOP_COMMAND_H_

#include <cstdint>
#include <latch>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "timingwheel/internal/base/inline_string.h"
#include "timingwheel/internal/base/manual_storage.h"
#include "timingwheel/internal/time/time_source.h"

namespace timingwheel {
namespace internal {

// Drain's hand-over: the loop fills `entries` and counts `taken` down.
// (TickRequest, the Tick command's, is in time_source.h.)
template <typename K, typename V>
struct DrainRequest {
  std::vector<std::pair<K, V>> entries;
  std::latch taken{1};
};

// What a command asks for.
enum class CommandKind : std::uint8_t {
  kNone,
  kSet,
  kMove,
  kRemove,
  kDrain,
  kTick,
  kStop
};

// A command's fields, and how to move them kind by kind: key and value are
// constructed only for the kinds that carry them, so K and V need no
// default constructor. The key is held as the wheel holds it (Stored: see
// base/stored_key.h).
template <typename K, typename V, typename Stored>
struct CommandFields {
  bool HasKey() const {
    return kind_ == CommandKind::kSet || kind_ == CommandKind::kMove ||
           kind_ == CommandKind::kRemove;
  }
  bool HasValue() const { return kind_ == CommandKind::kSet; }

  void Reset() {
    if (HasKey()) key_.Destroy();
    if (HasValue()) value_.Destroy();
    kind_ = CommandKind::kNone;
  }
  // Takes what `other` holds, leaving it empty.
  void Take(CommandFields& other) {
    kind_ = other.kind_;
    hash_ = other.hash_;
    arg_ = other.arg_;
    if (HasKey()) key_.Construct(std::move(other.key_.Get()));
    if (HasValue()) value_.Construct(std::move(other.value_.Get()));
    other.Reset();
  }

  CommandKind kind_ = CommandKind::kNone;
  // The key's hash (Wheel::HashOf), computed on the caller's thread: hashing
  // scales with the callers, and what a command costs the loop does not
  // depend on how dear the key's hash is (a long string, a user's hash).
  std::uint32_t hash_ = 0;
  union Arg {
    std::uint64_t deadline;
    DrainRequest<K, V>* drain;
    TickRequest* tick;
  } arg_{0};
  ManualStorage<Stored> key_;
  ManualStorage<V> value_;
};

// For trivially copyable K and V (integers, PODs) the fields are trivially
// copyable, and so is a command: the queue moves it as plain bytes rather
// than through a switch on its kind at every hop (producer, block, batch).
// Otherwise moving and destroying go kind by kind. (A base class chosen by
// specialization rather than constrained special members, which clang 14
// does not support.)
template <typename K, typename V, typename Stored,
          bool kTrivial = std::is_trivially_copyable_v<Stored>&&
              std::is_trivially_copyable_v<V>>
struct CommandStorage : CommandFields<K, V, Stored> {};

template <typename K, typename V, typename Stored>
struct CommandStorage<K, V, Stored, false> : CommandFields<K, V, Stored> {
  static constexpr bool kNothrowMove =
      std::is_nothrow_move_constructible_v<Stored> &&
      std::is_nothrow_move_constructible_v<V>;

  CommandStorage() = default;
  CommandStorage(CommandStorage&& other) noexcept(kNothrowMove) {
    this->Take(other);
  }
  CommandStorage& operator=(CommandStorage&& other) noexcept(kNothrowMove) {
    if (this != &other) {
      this->Reset();
      this->Take(other);
    }
    return *this;
  }
  ~CommandStorage() { this->Reset(); }
};

// One queued command; the queue's slots hold empty (kNone) ones. 32 bytes
// for 8-byte keys and values; 72 for inline string keys and 8-byte values.
template <typename K, typename V, typename Stored = K>
class Command : private CommandStorage<K, V, Stored> {
 public:
  using Kind = CommandKind;

  Command() = default;

  // Keyed commands carry their key's hash: Wheel::HashOf(key). Their key
  // is a K (moved or copied in) from which Stored is built in place.
  template <typename Key>
  static Command Set(Key&& key, V value, std::uint64_t deadline,
                     std::uint32_t hash) {
    Command c(Kind::kSet, hash);
    c.key_.Construct(std::forward<Key>(key));
    c.value_.Construct(std::move(value));
    c.arg_.deadline = deadline;
    return c;
  }
  template <typename Key>
  static Command Move(Key&& key, std::uint64_t deadline, std::uint32_t hash) {
    Command c(Kind::kMove, hash);
    c.key_.Construct(std::forward<Key>(key));
    c.arg_.deadline = deadline;
    return c;
  }
  template <typename Key>
  static Command Remove(Key&& key, std::uint32_t hash) {
    Command c(Kind::kRemove, hash);
    c.key_.Construct(std::forward<Key>(key));
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

  Kind kind() const { return this->kind_; }
  // Set, Move and Remove count against Options::max_pending.
  bool counted() const { return this->HasKey(); }
  Stored& key() { return this->key_.Get(); }
  V& value() { return this->value_.Get(); }
  std::uint32_t hash() const { return this->hash_; }
  std::uint64_t deadline() const { return this->arg_.deadline; }
  DrainRequest<K, V>* drain() const { return this->arg_.drain; }
  TickRequest* tick() const { return this->arg_.tick; }

 private:
  explicit Command(Kind kind, std::uint32_t hash = 0) {
    this->kind_ = kind;
    this->hash_ = hash;
  }
};

static_assert(
    std::is_trivially_copyable_v<Command<std::uint64_t, std::uint64_t>>);
static_assert(sizeof(Command<std::uint64_t, std::uint64_t>) == 32);
static_assert(sizeof(Command<std::string, std::uint64_t, InlineString>) == 72);

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_COMMAND_H_
