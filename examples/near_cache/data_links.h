// The near cache's data connections: a pool of blocking Redis connections
// that callers take one at a time, each remembering which invalidation
// session its CLIENT TRACKING redirects to.
#ifndef TIMINGWHEEL_EXAMPLES_NEAR_CACHE_DATA_LINKS_H_
#define TIMINGWHEEL_EXAMPLES_NEAR_CACHE_DATA_LINKS_H_

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "lease/redis_link.h"

namespace near_cache {

struct DataLink {
  DataLink(const std::string& host, int port, absl::Duration timeout)
      : redis(host, port, timeout) {}
  lease::RedisLink redis;
  // The session whose invalidation link this connection's tracking
  // redirects to; 0: no tracking (its replies must not be kept).
  std::uint64_t session = 0;
};

class DataLinks {
 public:
  DataLinks(std::string host, int port, absl::Duration timeout, int max_idle)
      : host_(std::move(host)),
        port_(port),
        timeout_(timeout),
        max_idle_(max_idle) {}

  // A link for one caller, given back to the pool when it goes out of scope
  // (a closed one too: the next Take reconnects it).
  class Lease {
   public:
    Lease(DataLinks* pool, std::unique_ptr<DataLink> link)
        : pool_(pool), link_(std::move(link)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (link_ != nullptr) pool_->Give(std::move(link_));
    }
    DataLink& operator*() const { return *link_; }
    DataLink* operator->() const { return link_.get(); }

   private:
    DataLinks* pool_;
    std::unique_ptr<DataLink> link_;
  };

  // Closes the idle links whose connection has ended (or has anything to
  // read, which an idle tracking connection never should): how many. Redis
  // forgets a closed client's tracked keys without a word to its redirect
  // target, so a link that died idle must be found by looking.
  int CloseDeadIdle() {
    std::lock_guard lock(mu_);
    std::vector<pollfd> fds;
    std::vector<DataLink*> polled;
    for (const std::unique_ptr<DataLink>& link : idle_) {
      if (!link->redis.connected()) continue;
      fds.push_back({link->redis.fd(), POLLIN, 0});
      polled.push_back(link.get());
    }
    if (fds.empty() || poll(fds.data(), fds.size(), 0) <= 0) return 0;
    int dead = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) {
        polled[i]->redis.Close();
        ++dead;
      }
    }
    return dead;
  }

  Lease Take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<DataLink> link = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(link));
      }
    }
    return Lease(this, std::make_unique<DataLink>(host_, port_, timeout_));
  }

 private:
  void Give(std::unique_ptr<DataLink> link) {
    std::lock_guard lock(mu_);
    if (static_cast<int>(idle_.size()) < max_idle_) {
      idle_.push_back(std::move(link));
    }
  }

  const std::string host_;
  const int port_;
  const absl::Duration timeout_;
  const int max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<DataLink>> idle_;  // guarded by mu_
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_EXAMPLES_NEAR_CACHE_DATA_LINKS_H_
