// The renewal half of LeaseKeeper: the thread that takes the renewals the
// wheel hands over, sends them to Redis in pipelined batches, and re-arms,
// retries or gives up each lock by its answer.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lease/lease_keeper.h"
#include "support/clock.h"

namespace lease {
namespace {

using support::MonoNanos;

// Extends the lock only while it holds our token, so a lock that expired
// and was taken by someone else is never extended by us. KEYS[1] = name,
// ARGV[1] = our token, ARGV[2] = ttl in ms. Returns 1 if extended, else 0.
constexpr char kRenewScript[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
void Record(timingwheel::LatencyHistogram& h, std::int64_t ns) {
  const absl::Duration d = absl::Nanoseconds(ns < 0 ? 0 : ns);
  ++h.buckets[timingwheel::LatencyHistogram::BucketOf(ns)];
  ++h.count;
  h.sum += d;
  if (d > h.max) h.max = d;
}

}  // namespace

void LeaseKeeper::RenewLoop() {
  std::vector<std::pair<std::uint64_t, Renewal>> due;
  const auto batch = static_cast<std::size_t>(options_.batch);
  // Two batches on the wire at a time: Redis works on one while this thread
  // reads the other's replies and writes the next.
  std::optional<Flight> in_flight;
  for (bool stopping = false; !stopping;) {
    {
      std::unique_lock lock(due_mu_);
      due_cv_.wait(lock, [this] { return stopping_ || !due_.empty(); });
      if (stopping_) return;
      due.swap(due_);
    }
    for (std::size_t begin = 0; begin < due.size(); begin += batch) {
      {
        std::lock_guard lock(due_mu_);
        if ((stopping = stopping_)) break;
      }
      const std::size_t end = std::min(due.size(), begin + batch);
      Flight next = Prepare({std::make_move_iterator(due.begin() + begin),
                             std::make_move_iterator(due.begin() + end)});
      Send(next);
      if (in_flight) Finish(*in_flight);
      in_flight = std::move(next);
    }
    // Abandon() returns only after every renewal sent has been answered.
    if (in_flight) Finish(*in_flight);
    in_flight.reset();
    due.clear();
  }
}

LeaseKeeper::Flight LeaseKeeper::Prepare(
    std::vector<std::pair<std::uint64_t, Renewal>> due) {
  Flight flight;
  const std::int64_t now_ns = MonoNanos();
  std::lock_guard lock(mu_);
  for (auto& [id, renewal] : due) {
    auto it = held_.find(renewal.name);
    if (it == held_.end() || it->second.id != id) continue;  // released
    if (now_ns >= it->second.valid_until_ns) {
      // No renewal got through in time: the key may have expired and been
      // taken by someone else, so the holder must not count on it.
      held_.erase(it);
      lost_.fetch_add(1, std::memory_order_relaxed);  // with the erase
      flight.lost.push_back(std::move(renewal.name));
      continue;
    }
    flight.items.push_back(
        Flight::Item{id, std::move(renewal.name), Token(id), renewal.due_ns});
  }
  return flight;
}

void LeaseKeeper::Send(Flight& flight) {
  if (flight.items.empty()) return;
  const bool was_connected = renew_link_.connected();
  absl::Status status = renew_link_.Connect();
  if (status.ok() && !was_connected) {
    connects_.fetch_add(1, std::memory_order_relaxed);
    renew_sha_.clear();  // perhaps a restarted server: load the script again
  }
  if (status.ok() && renew_sha_.empty()) {
    absl::StatusOr<Reply> sha =
        renew_link_.Call({"SCRIPT", "LOAD", kRenewScript});
    if (!sha.ok()) {
      status = sha.status();
    } else if ((*sha)->type != REDIS_REPLY_STRING) {
      status = absl::UnknownError(Describe(**sha));
    } else {
      renew_sha_.assign((*sha)->str, (*sha)->len);
    }
  }
  if (!status.ok()) {
    flight.error = std::string(status.message());
    return;
  }
  const std::string ttl_ms =
      absl::StrCat(absl::ToInt64Milliseconds(options_.ttl));
  flight.sent_ns = MonoNanos();
  for (const Flight::Item& item : flight.items) {
    renew_link_.Append(
        {"EVALSHA", renew_sha_, "1", item.name, item.token, ttl_ms});
  }
  // Sent even if the write fails: Finish() then reads "not connected".
  flight.sent = true;
  if (status = renew_link_.Flush(); !status.ok()) {
    flight.error = std::string(status.message());
  }
}

void LeaseKeeper::Finish(Flight& flight) {
  if (flight.sent) {
    for (Flight::Item& item : flight.items) {
      absl::StatusOr<Reply> reply = renew_link_.Read();
      if (!reply.ok()) {  // the link is closed: the rest got no answer
        flight.error = std::string(reply.status().message());
        break;
      }
      if ((*reply)->type == REDIS_REPLY_INTEGER) {
        item.outcome =
            (*reply)->integer == 1 ? Outcome::kRenewed : Outcome::kLost;
      } else {
        flight.error = Describe(**reply);
        if (absl::StrContains(flight.error, "NOSCRIPT")) renew_sha_.clear();
      }
    }
  }

  const std::int64_t done_ns = MonoNanos();
  const std::int64_t ttl_ns = absl::ToInt64Nanoseconds(options_.ttl);
  const std::int64_t retry_ns = absl::ToInt64Nanoseconds(options_.retry_after);
  std::vector<std::pair<std::uint64_t, Renewal>> rearm, retry;
  std::vector<std::string>& lost = flight.lost;
  std::vector<std::int64_t> lateness_ns;  // one per renewal applied
  std::size_t failures = 0;
  {
    std::lock_guard lock(mu_);
    for (Flight::Item& item : flight.items) {
      auto it = held_.find(item.name);
      if (it == held_.end() || it->second.id != item.id) continue;  // released
      switch (item.outcome) {
        case Outcome::kRenewed:
          lateness_ns.push_back(done_ns - item.due_ns);
          it->second.valid_until_ns = flight.sent_ns + ttl_ns;
          rearm.emplace_back(item.id, Renewal{std::move(item.name), 0});
          break;
        case Outcome::kLost:
          held_.erase(it);
          lost_.fetch_add(1, std::memory_order_relaxed);
          lost.push_back(std::move(item.name));
          break;
        case Outcome::kNoAnswer:
          ++failures;
          if (done_ns + retry_ns < it->second.valid_until_ns) {
            retry.emplace_back(item.id, Renewal{std::move(item.name), 0});
          } else {
            held_.erase(it);
            lost_.fetch_add(1, std::memory_order_relaxed);
            lost.push_back(std::move(item.name));
          }
          break;
      }
    }
  }
  {
    // A renewal and its lateness are counted under one lock, so stats()
    // never sees one without the other.
    std::lock_guard lock(lateness_mu_);
    for (const std::int64_t ns : lateness_ns) Record(lateness_, ns);
    renewals_ += lateness_ns.size();
  }
  // Refused only once the keeper is abandoned, when nothing is renewed.
  for (auto* group : {&rearm, &retry}) {
    const absl::Duration delay =
        group == &rearm ? options_.renew_every : options_.retry_after;
    const std::int64_t due = MonoNanos() + absl::ToInt64Nanoseconds(delay);
    for (auto& entry : *group) entry.second.due_ns = due;
    if (!group->empty()) (void)wheel_->SetTimers(absl::MakeSpan(*group), delay);
  }
  renew_failures_.fetch_add(failures, std::memory_order_relaxed);
  if (failures > 0) {
    Log(absl::StrCat("lease keeper: ", failures, " renewals got no answer (",
                     flight.error, "); retrying in ",
                     absl::FormatDuration(options_.retry_after)));
  }
  if (!lost.empty()) {
    Log(absl::StrCat("lease keeper: ", lost.size(), " lock(s) lost, e.g. ",
                     lost.front()));
  }
  if (options_.on_lost) {
    for (const std::string& name : lost) options_.on_lost(name);
  }
}

void LeaseKeeper::Log(std::string line) {
  const std::int64_t now = MonoNanos();
  if (last_log_ns_ != 0 && now - last_log_ns_ < 1'000'000'000) {
    ++logs_suppressed_;
    return;
  }
  if (logs_suppressed_ > 0) {
    absl::StrAppend(&line, " (", logs_suppressed_, " lines like it held back)");
    logs_suppressed_ = 0;
  }
  last_log_ns_ = now;
  options_.log(line);
}

}  // namespace lease
