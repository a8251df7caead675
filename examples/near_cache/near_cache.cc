#include "near_cache/near_cache.h"

#include <signal.h>

#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace near_cache {
namespace {

absl::Status CheckDuration(absl::Duration d, absl::string_view name) {
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("near cache: ", name, " must be positive and finite"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const NearCacheOptions& o) {
  if (o.host.empty()) {
    return absl::InvalidArgumentError("near cache: empty host");
  }
  if (o.port < 1 || o.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("near cache: port ", o.port, " not in 1..65535"));
  }
  if (o.ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("near cache: ttl must be positive");
  }
  for (auto [d, name] : {std::pair{o.io_timeout, "io_timeout"},
                         std::pair{o.heartbeat, "heartbeat"},
                         std::pair{o.reconnect_min, "reconnect_min"},
                         std::pair{o.reconnect_max, "reconnect_max"}}) {
    if (absl::Status s = CheckDuration(d, name); !s.ok()) return s;
  }
  if (o.reconnect_max < o.reconnect_min) {
    return absl::InvalidArgumentError(
        "near cache: reconnect_max below reconnect_min");
  }
  if (o.max_links < 1) {
    return absl::InvalidArgumentError("near cache: max_links must be >= 1");
  }
  // Redis refuses overlapping prefixes on one connection; say so up front.
  const auto& p = o.bcast_prefixes;
  for (std::size_t i = 0; i < p.size(); ++i) {
    for (std::size_t j = 0; j < p.size(); ++j) {
      if (i != j && absl::StartsWith(p[j], p[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "near cache: prefixes '", p[i], "' and '", p[j], "' overlap"));
      }
    }
  }
  return absl::OkStatus();
}

// A reply to a read, or why it is not one: nullopt for nil.
absl::StatusOr<std::optional<std::string>> ValueOf(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING:
      return std::optional<std::string>(std::string(r.str, r.len));
    case REDIS_REPLY_NIL:
      return std::optional<std::string>();
    case REDIS_REPLY_ERROR:
      return absl::FailedPreconditionError(lease::Describe(r));
    default:
      return absl::InternalError(
          absl::StrCat("near cache: unexpected ", lease::Describe(r)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NearCache>> NearCache::Create(
    NearCacheOptions options) {
  return CreateWith(std::move(options), Mutants{});
}

absl::StatusOr<std::unique_ptr<NearCache>> NearCache::CreateWith(
    NearCacheOptions options, Mutants mutants) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  // A write to a connection Redis has closed raises SIGPIPE, whose default
  // ends the process; the write's error is what the cache acts on.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  std::unique_ptr<NearCache> cache(
      new NearCache(std::move(options), std::move(mutants)));
  if (absl::Status s = cache->Start(); !s.ok()) return s;
  return cache;
}

NearCache::NearCache(NearCacheOptions options, Mutants mutants)
    : options_(std::move(options)),
      mutants_(std::move(mutants)),
      links_(options_.host, options_.port, options_.io_timeout,
             options_.max_links) {}

// The invalidation link goes first: its thread calls into the local cache.
NearCache::~NearCache() { invalidation_.reset(); }

absl::Status NearCache::Start() {
  timingwheel::CacheOptions local_options;
  local_options.ttl = options_.ttl;
  local_options.max_entries = options_.max_entries;
  local_options.wheel.interval = absl::Milliseconds(100);  // ttl precision
  absl::StatusOr<std::unique_ptr<Local>> local = Local::Create(local_options);
  if (!local.ok()) return local.status();
  local_ = std::move(*local);
  InvalidationEvents events{
      .up = [this](std::int64_t id) { OnUp(id); },
      .keys = [this](const std::vector<std::string>& keys) { OnKeys(keys); },
      .flush_all = [this] { OnFlushAll(); },
      .lost = [this] { OnLost(); },
      .tick =
          [this] {
            if (links_.CloseDeadIdle() > 0) DataLinkLost();
          },
  };
  absl::StatusOr<std::unique_ptr<InvalidationLink>> link =
      InvalidationLink::Start({.host = options_.host,
                               .port = options_.port,
                               .io_timeout = options_.io_timeout,
                               .heartbeat = options_.heartbeat,
                               .reconnect_min = options_.reconnect_min,
                               .reconnect_max = options_.reconnect_max},
                              std::move(events));
  if (!link.ok()) return link.status();
  invalidation_ = std::move(*link);
  // Turning tracking on once here makes a server that refuses it (or the
  // prefixes) an error of Create, not of every later Get.
  absl::StatusOr<DataLinks::Lease> first = TakeLink();
  return first.status();
}

void NearCache::OnUp(std::int64_t client_id) {
  std::lock_guard lock(mu_);
  redirect_id_ = client_id;
  session_ = sessions_.fetch_add(1) + 1;
  ++generation_;  // nothing in flight under the old session is kept
}

void NearCache::OnKeys(const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  for (const std::string& key : keys) DropLocked(key);
  invalidations_.fetch_add(keys.size());
}

void NearCache::DropLocked(const std::string& key) {
  if (auto it = flights_.find(key); it != flights_.end()) ++it->second.seq;
  local_->Delete(key);
}

void NearCache::Drop(absl::string_view key) {
  std::lock_guard lock(mu_);
  DropLocked(std::string(key));
}

void NearCache::OnFlushAll() {
  std::lock_guard lock(mu_);
  FlushLocked();
}

void NearCache::OnLost() {
  link_losses_.fetch_add(1);
  std::lock_guard lock(mu_);
  session_ = 0;  // until the link is back, replies are not kept
  if (!mutants_.no_flush_on_reconnect) FlushLocked();
}

void NearCache::DataLinkLost() {
  // Redis drops the tracking of a client that disconnects, so invalidations
  // of what was read over this link may never come.
  link_losses_.fetch_add(1);
  std::lock_guard lock(mu_);
  if (!mutants_.no_flush_on_reconnect) FlushLocked();
}

void NearCache::FlushLocked() {
  ++generation_;
  local_->Clear();
  flushes_.fetch_add(1);
}

bool NearCache::Keepable(absl::string_view key) const {
  if (options_.bcast_prefixes.empty()) return true;
  for (const std::string& prefix : options_.bcast_prefixes) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

NearCache::Ticket NearCache::Begin(absl::string_view key,
                                   const DataLink& link) {
  Ticket t{.key = std::string(key)};
  std::lock_guard lock(mu_);
  Flight& flight = flights_[t.key];
  ++flight.refs;
  t.seq = flight.seq;
  t.generation = generation_;
  t.trackable = Keepable(key) && link.session != 0 && link.session == session_;
  return t;
}

void NearCache::End(const Ticket& t, const std::optional<std::string>* value) {
  if (value != nullptr && mutants_.before_keep) mutants_.before_keep(t.key);
  std::lock_guard lock(mu_);
  auto it = flights_.find(t.key);
  const bool raced = it->second.seq != t.seq;
  if (--it->second.refs == 0) flights_.erase(it);
  if (value == nullptr) return;
  // The same lock as OnKeys: an invalidation either came before this check
  // (and the reply is dropped) or comes after the copy is stored (and
  // deletes it). Checked after the reply, so one that arrived while the GET
  // was in flight is seen here even though it found nothing to delete.
  const bool keep = t.trackable && t.generation == generation_ &&
                    (!raced || mutants_.ignore_inflight_invalidations);
  if (keep && local_->Set(t.key, *value).ok()) {
    kept_.fetch_add(1);
  } else {
    refused_.fetch_add(1);
  }
}

absl::StatusOr<DataLinks::Lease> NearCache::TakeLink() {
  DataLinks::Lease link = links_.Take();
  std::uint64_t session;
  std::int64_t redirect;
  {
    std::lock_guard lock(mu_);
    session = session_;
    redirect = redirect_id_;
  }
  if (link->redis.connected() && link->session == session) return link;
  // A fresh connection rather than tracking switched over: a new session
  // means the old redirect is gone, and nothing read under it is kept.
  link->redis.Close();
  link->session = 0;
  if (absl::Status s = link->redis.Connect(); !s.ok()) return s;
  if (session == 0) return link;  // read-through while the link is down
  const std::string id = absl::StrCat(redirect);
  std::vector<absl::string_view> args = {"CLIENT", "TRACKING", "ON", "REDIRECT",
                                         id};
  if (!options_.bcast_prefixes.empty()) args.push_back("BCAST");
  for (const std::string& prefix : options_.bcast_prefixes) {
    args.push_back("PREFIX");
    args.push_back(prefix);
  }
  link->redis.Append(args);
  absl::StatusOr<lease::Reply> reply = link->redis.Read();
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    // The redirect target vanished since we read its id: the session is
    // ending; read through until the next one.
    if (absl::StrContains(lease::Describe(**reply), "does not exist")) {
      return link;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("CLIENT TRACKING refused: ", lease::Describe(**reply)));
  }
  link->session = session;
  return link;
}

absl::StatusOr<std::optional<std::string>> NearCache::Get(
    absl::string_view key) {
  if (std::optional<std::optional<std::string>> hit =
          local_->Get(std::string_view(key.data(), key.size()))) {
    hits_.fetch_add(1);
    return std::move(*hit);
  }
  misses_.fetch_add(1);
  absl::StatusOr<DataLinks::Lease> link = TakeLink();
  if (!link.ok()) return link.status();
  const Ticket ticket = Begin(key, **link);
  absl::StatusOr<lease::Reply> reply = (*link)->redis.Call({"GET", key});
  if (!reply.ok()) {
    End(ticket, nullptr);
    DataLinkLost();
    return reply.status();
  }
  absl::StatusOr<std::optional<std::string>> value = ValueOf(**reply);
  End(ticket, value.ok() ? &*value : nullptr);
  return value;
}

absl::StatusOr<std::vector<std::optional<std::string>>> NearCache::GetMany(
    absl::Span<const std::string> keys) {
  std::vector<std::optional<std::string>> values(keys.size());
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (std::optional<std::optional<std::string>> hit = local_->Get(keys[i])) {
      hits_.fetch_add(1);
      values[i] = std::move(*hit);
    } else {
      missing.push_back(i);
    }
  }
  if (missing.empty()) return values;
  misses_.fetch_add(missing.size());
  absl::StatusOr<DataLinks::Lease> link = TakeLink();
  if (!link.ok()) return link.status();
  std::vector<Ticket> tickets;
  tickets.reserve(missing.size());
  for (std::size_t i : missing) {
    tickets.push_back(Begin(keys[i], **link));
    (*link)->redis.Append({"GET", keys[i]});
  }
  // Every reply is read even after an error reply, or the next caller of
  // this link would read the rest as its own; after a lost link none is.
  absl::Status lost, refused;
  for (std::size_t n = 0; n < missing.size(); ++n) {
    absl::StatusOr<lease::Reply> reply;
    if (lost.ok()) reply = (*link)->redis.Read();
    if (lost.ok() && !reply.ok()) {
      lost = reply.status();
      DataLinkLost();
    }
    if (!lost.ok()) {
      End(tickets[n], nullptr);
      continue;
    }
    absl::StatusOr<std::optional<std::string>> value = ValueOf(**reply);
    End(tickets[n], value.ok() ? &*value : nullptr);
    if (!value.ok()) {
      if (refused.ok()) refused = value.status();
    } else {
      values[missing[n]] = std::move(*value);
    }
  }
  if (!lost.ok()) return lost;
  if (!refused.ok()) return refused;
  return values;
}

absl::Status NearCache::Set(absl::string_view key, absl::string_view value) {
  absl::StatusOr<DataLinks::Lease> link = TakeLink();
  if (!link.ok()) return link.status();
  absl::StatusOr<lease::Reply> reply = (*link)->redis.Call({"SET", key, value});
  if (!reply.ok()) {
    DataLinkLost();
    return reply.status();
  }
  // Dropped even when Redis refused: whatever the copy was, this caller
  // has reason to think it old.
  Drop(key);
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    return absl::FailedPreconditionError(lease::Describe(**reply));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> NearCache::Delete(absl::string_view key) {
  absl::StatusOr<DataLinks::Lease> link = TakeLink();
  if (!link.ok()) return link.status();
  absl::StatusOr<lease::Reply> reply = (*link)->redis.Call({"DEL", key});
  if (!reply.ok()) {
    DataLinkLost();
    return reply.status();
  }
  Drop(key);
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::FailedPreconditionError(lease::Describe(**reply));
  }
  return (*reply)->integer > 0;
}

bool NearCache::Cached(absl::string_view key) const {
  return local_->Get(std::string_view(key.data(), key.size())).has_value();
}

NearCacheStats NearCache::stats() const {
  NearCacheStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.kept = kept_.load();
  s.refused = refused_.load();
  s.invalidations = invalidations_.load();
  s.flushes = flushes_.load();
  s.link_losses = link_losses_.load();
  s.sessions = sessions_.load();
  s.local_entries = local_->size();
  std::lock_guard lock(mu_);
  s.tracking = session_ != 0;
  return s;
}

}  // namespace near_cache
