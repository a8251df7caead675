#include "lease/lease_keeper.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "support/clock.h"

namespace lease {
namespace {

using support::MonoNanos;

// Deletes the lock only while it holds our token. Returns 1 if deleted.
constexpr char kReleaseScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

bool IsOk(const redisReply& reply) {
  return reply.type == REDIS_REPLY_STATUS &&
         absl::string_view(reply.str, reply.len) == "OK";
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Create(
    KeeperOptions options) {
  if (options.renew_every == absl::ZeroDuration()) {
    options.renew_every = options.ttl / 3;
  }
  if (options.retry_after == absl::ZeroDuration()) {
    options.retry_after = options.ttl / 10;
  }
  if (options.ttl < absl::Milliseconds(10) ||
      options.ttl == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("ttl must be finite and >= 10 ms");
  }
  if (options.renew_every <= absl::ZeroDuration() ||
      options.renew_every >= options.ttl) {
    return absl::InvalidArgumentError("renew_every must be in (0, ttl)");
  }
  if (options.retry_after <= absl::ZeroDuration() ||
      options.tick <= absl::ZeroDuration() ||
      options.io_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "retry_after, tick and io_timeout must be positive");
  }
  if (options.batch < 1 || options.port < 1 || options.port > 65535 ||
      options.host.empty()) {
    return absl::InvalidArgumentError("batch >= 1, a host and a port needed");
  }
  // A write to a connection Redis has closed raises SIGPIPE, whose default
  // ends the process; the write's error is what the keeper acts on. A
  // handler the program installed is left alone.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  if (!options.log) {
    options.log = [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
  std::unique_ptr<LeaseKeeper> keeper(new LeaseKeeper(std::move(options)));
  timingwheel::Options wheel_options;
  wheel_options.interval = keeper->options_.tick;
  LeaseKeeper* k = keeper.get();
  auto wheel =
      Wheel::Create(wheel_options, [k](std::uint64_t id, Renewal renewal) {
        std::lock_guard lock(k->due_mu_);
        k->due_.emplace_back(id, std::move(renewal));
        if (k->due_.size() == 1) k->due_cv_.notify_one();
      });
  if (!wheel.ok()) return wheel.status();
  keeper->wheel_ = std::move(*wheel);
  keeper->renewer_ = std::thread([k] { k->RenewLoop(); });
  (void)pthread_setname_np(keeper->renewer_.native_handle(), "lease-renew");
  return keeper;
}

LeaseKeeper::LeaseKeeper(KeeperOptions options)
    : options_(std::move(options)),
      keeper_id_(absl::BitGen()()),
      call_link_(options_.host, options_.port, options_.io_timeout),
      renew_link_(options_.host, options_.port, options_.io_timeout) {}

LeaseKeeper::~LeaseKeeper() { Abandon(); }

std::string LeaseKeeper::Token(std::uint64_t id) const {
  return absl::StrFormat("%016x:%d", keeper_id_, id);
}

absl::Status LeaseKeeper::Arm(std::uint64_t id, std::string name,
                              absl::Duration delay) {
  const std::int64_t due = MonoNanos() + absl::ToInt64Nanoseconds(delay);
  return wheel_->SetTimer(id, Renewal{std::move(name), due}, delay);
}

absl::StatusOr<bool> LeaseKeeper::Acquire(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty lock name");
  {
    std::lock_guard lock(mu_);
    if (abandoned_) return absl::FailedPreconditionError("keeper abandoned");
    if (held_.contains(name)) {
      return absl::FailedPreconditionError(
          absl::StrCat("lock ", name, " is held by this keeper already"));
    }
  }
  const std::uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  const std::string ttl_ms =
      absl::StrCat(absl::ToInt64Milliseconds(options_.ttl));
  std::int64_t sent_ns = 0;
  absl::StatusOr<Reply> reply;
  {
    std::lock_guard lock(call_mu_);
    sent_ns = MonoNanos();
    reply = call_link_.Call({"SET", name, Token(id), "NX", "PX", ttl_ms});
  }
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (!IsOk(**reply)) return absl::UnknownError(Describe(**reply));
  {
    std::lock_guard lock(mu_);
    // Abandoned meanwhile: the key expires within a ttl, as the others do.
    if (abandoned_) return absl::FailedPreconditionError("keeper abandoned");
    held_[name] = Held{id, sent_ns + absl::ToInt64Nanoseconds(options_.ttl)};
  }
  acquired_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status s = Arm(id, name, options_.renew_every); !s.ok()) return s;
  return true;
}

absl::StatusOr<std::size_t> LeaseKeeper::AcquireMany(
    absl::Span<const std::string> names) {
  for (const std::string& name : names) {
    if (name.empty()) return absl::InvalidArgumentError("empty lock name");
  }
  const std::string ttl_ms =
      absl::StrCat(absl::ToInt64Milliseconds(options_.ttl));
  std::size_t taken = 0;
  std::vector<std::pair<std::uint64_t, const std::string*>> sent;
  std::vector<std::pair<std::uint64_t, Renewal>> arm;
  for (std::size_t begin = 0; begin < names.size();
       begin += static_cast<std::size_t>(options_.batch)) {
    const std::size_t end = std::min(
        names.size(), begin + static_cast<std::size_t>(options_.batch));
    sent.clear();
    {
      std::lock_guard lock(mu_);
      if (abandoned_) return absl::FailedPreconditionError("keeper abandoned");
      for (std::size_t i = begin; i < end; ++i) {
        if (!held_.contains(names[i])) {
          sent.emplace_back(next_id_.fetch_add(1, std::memory_order_relaxed),
                            &names[i]);
        }
      }
    }
    std::int64_t sent_ns = 0;
    std::vector<Reply> replies;
    {
      std::lock_guard lock(call_mu_);
      if (absl::Status s = call_link_.Connect(); !s.ok()) return s;
      sent_ns = MonoNanos();
      for (const auto& [id, name] : sent) {
        call_link_.Append({"SET", *name, Token(id), "NX", "PX", ttl_ms});
      }
      for (std::size_t i = 0; i < sent.size(); ++i) {
        absl::StatusOr<Reply> reply = call_link_.Read();
        if (!reply.ok()) return reply.status();
        replies.push_back(std::move(*reply));
      }
    }
    arm.clear();
    const std::int64_t due =
        MonoNanos() + absl::ToInt64Nanoseconds(options_.renew_every);
    // An error reply (out of memory, a key of another type) ends the call,
    // after the locks this batch did take are armed like the others.
    absl::Status error;
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < sent.size(); ++i) {
        if (replies[i]->type == REDIS_REPLY_NIL) {
          refused_.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (!IsOk(*replies[i])) {
          if (error.ok()) error = absl::UnknownError(Describe(*replies[i]));
          continue;
        }
        const auto& [id, name] = sent[i];
        held_[*name] =
            Held{id, sent_ns + absl::ToInt64Nanoseconds(options_.ttl)};
        arm.emplace_back(id, Renewal{*name, due});
      }
    }
    taken += arm.size();
    acquired_.fetch_add(arm.size(), std::memory_order_relaxed);
    if (absl::Status s =
            wheel_->SetTimers(absl::MakeSpan(arm), options_.renew_every);
        !s.ok()) {
      return s;
    }
    if (!error.ok()) return error;
  }
  return taken;
}

absl::StatusOr<bool> LeaseKeeper::Release(const std::string& name) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(name);
    if (it == held_.end()) {
      return absl::NotFoundError(absl::StrCat("lock ", name, " is not held"));
    }
    id = it->second.id;
    held_.erase(it);
  }
  // A renewal already on its way finds the lock gone from held_ and drops it.
  (void)wheel_->RemoveTimer(id);
  absl::StatusOr<Reply> reply;
  {
    std::lock_guard lock(call_mu_);
    reply = call_link_.Call({"EVAL", kReleaseScript, "1", name, Token(id)});
  }
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::UnknownError(Describe(**reply));
  }
  if ((*reply)->integer != 1) return false;
  released_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

absl::StatusOr<std::size_t> LeaseKeeper::ReleaseAll() {
  std::vector<std::pair<std::uint64_t, std::string>> all;
  {
    std::lock_guard lock(mu_);
    all.reserve(held_.size());
    for (auto& [name, held] : held_) all.emplace_back(held.id, name);
    held_.clear();
  }
  std::vector<std::uint64_t> ids;
  ids.reserve(all.size());
  for (const auto& item : all) ids.push_back(item.first);
  (void)wheel_->RemoveTimers(absl::MakeConstSpan(ids));
  std::size_t deleted = 0;
  std::lock_guard lock(call_mu_);
  for (std::size_t begin = 0; begin < all.size();
       begin += static_cast<std::size_t>(options_.batch)) {
    const std::size_t end =
        std::min(all.size(), begin + static_cast<std::size_t>(options_.batch));
    if (absl::Status s = call_link_.Connect(); !s.ok()) return s;
    for (std::size_t i = begin; i < end; ++i) {
      call_link_.Append(
          {"EVAL", kReleaseScript, "1", all[i].second, Token(all[i].first)});
    }
    for (std::size_t i = begin; i < end; ++i) {
      absl::StatusOr<Reply> reply = call_link_.Read();
      if (!reply.ok()) return reply.status();
      if ((*reply)->type == REDIS_REPLY_INTEGER && (*reply)->integer == 1) {
        ++deleted;
      }
    }
  }
  released_.fetch_add(deleted, std::memory_order_relaxed);
  return deleted;
}

void LeaseKeeper::Abandon() {
  {
    std::lock_guard lock(mu_);
    if (abandoned_) return;
    abandoned_ = true;
  }
  // No execute callback runs after Stop(); then the renewer finishes the
  // batch it is sending (bounded by io_timeout) and exits. (Neither exists
  // if Create failed half way.)
  if (wheel_ != nullptr) (void)wheel_->Stop();
  {
    std::lock_guard lock(due_mu_);
    stopping_ = true;
  }
  due_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

bool LeaseKeeper::Holds(const std::string& name) const {
  std::lock_guard lock(mu_);
  return held_.contains(name);
}

KeeperStats LeaseKeeper::stats() const {
  KeeperStats s;
  {
    std::lock_guard lock(mu_);
    s.held = held_.size();
  }
  s.acquired = acquired_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  s.released = released_.load(std::memory_order_relaxed);
  s.renew_failures = renew_failures_.load(std::memory_order_relaxed);
  s.lost = lost_.load(std::memory_order_relaxed);
  s.connects = connects_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(lateness_mu_);
    s.renewals = renewals_;
    s.renew_lateness = lateness_;
  }
  s.wheel = wheel_->stats();
  return s;
}

}  // namespace lease
