#include "near_cache/invalidation_link.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace near_cache {
namespace {

constexpr absl::string_view kChannel = "__redis__:invalidate";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

absl::string_view Str(const redisReply* r) {
  return r->str == nullptr ? absl::string_view()
                           : absl::string_view(r->str, r->len);
}

// One command's reply on a connection that is not subscribed yet.
absl::StatusOr<Reply> Call(redisContext* c, const char* command) {
  void* raw = redisCommand(c, command);
  if (raw == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("redis: ", c->err != 0 ? c->errstr : "connection lost"));
  }
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::FailedPreconditionError(
        absl::StrCat("redis refused ", command, ": ", Str(reply.get())));
  }
  return reply;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InvalidationLink>> InvalidationLink::Start(
    InvalidationLinkOptions options, InvalidationEvents events) {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return absl::ResourceExhaustedError("eventfd failed");
  std::unique_ptr<InvalidationLink> link(
      new InvalidationLink(std::move(options), std::move(events), fd));
  if (absl::Status s = link->Connect(); !s.ok()) return s;
  link->thread_ = std::thread([l = link.get()] { l->Run(); });
  return link;
}

InvalidationLink::~InvalidationLink() {
  stop_.store(true);
  const std::uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The counter cannot overflow from one write; nothing else can fail.
  }
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

absl::Status InvalidationLink::Connect() {
  context_.reset();
  ping_outstanding_ = false;
  Context c(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                    absl::ToTimeval(options_.io_timeout)));
  if (c == nullptr) return absl::ResourceExhaustedError("redis: out of memory");
  if (c->err != 0) {
    return absl::UnavailableError(absl::StrCat("redis ", options_.host, ":",
                                               options_.port, ": ", c->errstr));
  }
  if (redisSetTimeout(c.get(), absl::ToTimeval(options_.io_timeout)) !=
      REDIS_OK) {
    return absl::UnavailableError(absl::StrCat("redis: ", c->errstr));
  }
  absl::StatusOr<Reply> id = Call(c.get(), "CLIENT ID");
  if (!id.ok()) return id.status();
  if ((*id)->type != REDIS_REPLY_INTEGER) {
    return absl::FailedPreconditionError("redis: CLIENT ID gave no integer");
  }
  // Redis sends a RESP2 client's redirected invalidations only while it is
  // subscribed, so `up` waits for the subscription's confirmation.
  absl::StatusOr<Reply> sub = Call(c.get(), "SUBSCRIBE __redis__:invalidate");
  if (!sub.ok()) return sub.status();
  if ((*sub)->type != REDIS_REPLY_ARRAY || (*sub)->elements != 3 ||
      Str((*sub)->element[0]) != "subscribe") {
    return absl::FailedPreconditionError("redis: SUBSCRIBE not confirmed");
  }
  context_ = std::move(c);
  events_.up((*id)->integer);
  return absl::OkStatus();
}

void InvalidationLink::Run() {
  absl::Duration backoff = options_.reconnect_min;
  // A std engine, not absl::BitGen: Debian's Abseil seeds BitGen from a
  // shared pool that ThreadSanitizer cannot see synchronized.
  std::minstd_rand rng(std::random_device{}());
  while (!stop_.load()) {
    if (context_ != nullptr) {
      if (Serve()) return;
      context_.reset();
      events_.lost();
      backoff = options_.reconnect_min;
    }
    // Jittered so that many instances do not reconnect in step.
    const absl::Duration wait = backoff * absl::Uniform(rng, 0.5, 1.0);
    if (WaitFor(wait, false) == Wait::kStop) return;
    backoff = std::min(backoff * 2, options_.reconnect_max);
    if (!Connect().ok()) context_.reset();
  }
}

bool InvalidationLink::Serve() {
  absl::Time last_heard = absl::Now();
  absl::Time last_tick = last_heard;
  absl::Time ping_sent = last_heard;
  while (true) {
    if (!Drain()) return false;
    const Wait wait = WaitFor(options_.check_every, true);
    if (wait == Wait::kStop) return true;
    const absl::Time now = absl::Now();
    if (wait == Wait::kReadable) {
      if (redisBufferRead(context_.get()) != REDIS_OK) return false;
      last_heard = now;
      ping_outstanding_ = false;  // anything at all: the link is alive
    }
    if (now - last_tick >= options_.check_every) {
      last_tick = now;
      events_.tick();
    }
    // Idle for a heartbeat: a PING still unanswered after another one
    // means the peer is gone without closing; else ask one.
    if (ping_outstanding_) {
      if (now - ping_sent > options_.heartbeat) return false;
    } else if (now - last_heard > options_.heartbeat) {
      if (!Ping()) return false;
      ping_sent = now;
    }
  }
}

bool InvalidationLink::Ping() {
  if (redisAppendCommand(context_.get(), "PING") != REDIS_OK) return false;
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) return false;
  }
  ping_outstanding_ = true;
  return true;
}

bool InvalidationLink::Drain() {
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_.get(), &raw) != REDIS_OK) {
      return false;
    }
    if (raw == nullptr) return true;
    Reply reply(static_cast<redisReply*>(raw));
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) continue;
    const absl::string_view kind = Str(reply->element[0]);
    if (kind == "pong") continue;
    if (kind != "message" || reply->elements != 3 ||
        Str(reply->element[1]) != kChannel) {
      continue;
    }
    const redisReply* payload = reply->element[2];
    if (payload->type == REDIS_REPLY_NIL) {
      events_.flush_all();  // FLUSHALL / FLUSHDB
    } else if (payload->type == REDIS_REPLY_ARRAY) {
      std::vector<std::string> keys;
      keys.reserve(payload->elements);
      for (std::size_t i = 0; i < payload->elements; ++i) {
        keys.emplace_back(Str(payload->element[i]));
      }
      events_.keys(keys);
    } else if (payload->type == REDIS_REPLY_STRING) {
      events_.keys({std::string(Str(payload))});
    }
  }
}

InvalidationLink::Wait InvalidationLink::WaitFor(absl::Duration timeout,
                                                 bool with_connection) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {-1, POLLIN, 0}};
  if (with_connection) fds[1].fd = context_->fd;
  const int ms = static_cast<int>(
      std::max<std::int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  int n;
  do {
    n = poll(fds, 2, ms);  // a signal restarts the wait; rare, so not shortened
  } while (n < 0 && errno == EINTR);
  if (stop_.load()) return Wait::kStop;
  if (n > 0 && fds[1].revents != 0) return Wait::kReadable;
  return Wait::kTimeout;
}

}  // namespace near_cache
