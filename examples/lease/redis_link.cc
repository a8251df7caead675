#include "lease/redis_link.h"

#include <sys/time.h>

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lease {

absl::Status RedisLink::Connect() {
  if (context_ != nullptr) return absl::OkStatus();
  std::unique_ptr<redisContext, ContextDeleter> c(
      redisConnectWithTimeout(host_.c_str(), port_, absl::ToTimeval(timeout_)));
  if (c == nullptr) return absl::ResourceExhaustedError("redis: out of memory");
  if (c->err != 0) {
    return absl::UnavailableError(
        absl::StrCat("redis ", host_, ":", port_, ": ", c->errstr));
  }
  if (redisSetTimeout(c.get(), absl::ToTimeval(timeout_)) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat("redis: ", c->errstr));
  }
  context_ = std::move(c);
  return absl::OkStatus();
}

void RedisLink::Append(std::initializer_list<absl::string_view> args) {
  Append(absl::MakeConstSpan(args.begin(), args.size()));
}

void RedisLink::Append(absl::Span<const absl::string_view> args) {
  if (context_ == nullptr) return;
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (absl::string_view arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()),
                         argv.data(), lengths.data());
}

absl::Status RedisLink::Flush() {
  if (context_ == nullptr)
    return absl::UnavailableError("redis: not connected");
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) {
      absl::Status status =
          absl::UnavailableError(absl::StrCat("redis: ", context_->errstr));
      context_.reset();
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Reply> RedisLink::Read() {
  if (context_ == nullptr)
    return absl::UnavailableError("redis: not connected");
  void* raw = nullptr;
  if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
    absl::Status status = absl::UnavailableError(absl::StrCat(
        "redis: ", context_->err != 0 ? context_->errstr : "connection lost"));
    context_.reset();
    return status;
  }
  return Reply(static_cast<redisReply*>(raw));
}

absl::StatusOr<Reply> RedisLink::Call(
    std::initializer_list<absl::string_view> args) {
  if (absl::Status s = Connect(); !s.ok()) return s;
  Append(args);
  return Read();
}

std::string Describe(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
      return absl::StrCat("redis: ", absl::string_view(reply.str, reply.len));
    case REDIS_REPLY_INTEGER:
      return absl::StrCat("redis: integer ", reply.integer);
    case REDIS_REPLY_NIL:
      return "redis: nil";
    default:
      return absl::StrCat("redis: reply of type ", reply.type);
  }
}

}  // namespace lease
