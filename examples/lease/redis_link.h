// One blocking hiredis connection with timeouts, and what a lease keeper
// asks of it. Not thread-safe: each thread that talks to Redis owns its own.
#ifndef TIMINGWHEEL_EXAMPLES_LEASE_REDIS_LINK_H_
#define TIMINGWHEEL_EXAMPLES_LEASE_REDIS_LINK_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace lease {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A connection that may be down. Connect() (re)opens it; any I/O error or
// timeout closes it, so the next call reconnects instead of reading a stream
// that has lost its place.
class RedisLink {
 public:
  RedisLink(std::string host, int port, absl::Duration timeout)
      : host_(std::move(host)), port_(port), timeout_(timeout) {}

  bool connected() const { return context_ != nullptr; }
  // The socket while connected, else -1: for poll(), never for I/O.
  int fd() const { return context_ != nullptr ? context_->fd : -1; }
  // Opens the connection if it is closed. Unavailable when the server cannot
  // be reached within the timeout.
  absl::Status Connect();
  void Close() { context_.reset(); }

  // Queues a command; Read() sends everything queued and reads one reply.
  // The arguments are binary-safe.
  void Append(std::initializer_list<absl::string_view> args);
  // Append for a command whose arguments are only known at run time.
  void Append(absl::Span<const absl::string_view> args);
  // Sends everything queued without reading; Unavailable (and the link
  // closed) on an I/O error or timeout.
  absl::Status Flush();
  // The next reply of a pipeline: Unavailable (and the link closed) on an
  // I/O error or timeout; an error reply is returned as a reply.
  absl::StatusOr<Reply> Read();
  // Append() then Read(), after Connect().
  absl::StatusOr<Reply> Call(std::initializer_list<absl::string_view> args);

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const { redisFree(c); }
  };

  std::string host_;
  int port_;
  absl::Duration timeout_;
  std::unique_ptr<redisContext, ContextDeleter> context_;
};

// "redis: <what the reply or the link says>", for logs and statuses.
std::string Describe(const redisReply& reply);

}  // namespace lease

#endif  // TIMINGWHEEL_EXAMPLES_LEASE_REDIS_LINK_H_
