// A throwaway redis-server for the lease example and its test: on a free
// loopback port, its files in a new temporary directory, nothing persisted.
#ifndef TIMINGWHEEL_EXAMPLES_LEASE_REDIS_SERVER_H_
#define TIMINGWHEEL_EXAMPLES_LEASE_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lease {

class RedisServer {
 public:
  // Finds redis-server on PATH (or in /usr/bin, /usr/sbin), starts it and
  // waits until it answers PING. NotFound when there is no redis-server.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer();  // kills the server and removes its directory

  int port() const { return port_; }
  pid_t pid() const { return pid_; }  // 0 while stopped

  // Kills the server at once (SIGKILL, as a crash): its data is gone.
  void Kill();
  // Starts it again on the same port, empty.
  absl::Status Restart();

 private:
  RedisServer(std::string binary, std::string dir, int port)
      : binary_(std::move(binary)), dir_(std::move(dir)), port_(port) {}
  absl::Status Launch();

  std::string binary_;
  std::string dir_;
  int port_;
  pid_t pid_ = 0;
};

}  // namespace lease

#endif  // TIMINGWHEEL_EXAMPLES_LEASE_REDIS_SERVER_H_
