// The connection Redis sends a near cache's invalidations to (RESP2: CLIENT
// TRACKING ... REDIRECT <its id>, the messages published on
// __redis__:invalidate). A thread reads it, PINGs it when idle, and when it
// is lost reports so and reconnects with backoff.
#ifndef TIMINGWHEEL_EXAMPLES_NEAR_CACHE_INVALIDATION_LINK_H_
#define TIMINGWHEEL_EXAMPLES_NEAR_CACHE_INVALIDATION_LINK_H_

#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace near_cache {

// What the link reports, always from one thread at a time: `up` once
// subscribed (data connections may then redirect to `client_id`), `keys`
// and `flush_all` as invalidations arrive, `lost` when the connection is
// gone (every invalidation since may be lost with it), and `tick` about
// every `check_every` while it is up.
struct InvalidationEvents {
  std::function<void(std::int64_t client_id)> up;
  std::function<void(const std::vector<std::string>& keys)> keys;
  std::function<void()> flush_all;
  std::function<void()> lost;
  std::function<void()> tick;
};

struct InvalidationLinkOptions {
  std::string host;
  int port = 0;
  absl::Duration io_timeout;
  absl::Duration heartbeat;
  absl::Duration reconnect_min;
  absl::Duration reconnect_max;
  absl::Duration check_every = absl::Milliseconds(20);
};

class InvalidationLink {
 public:
  // Connects and subscribes on the calling thread (calling events.up there),
  // returning why not; then reads on a thread of its own.
  static absl::StatusOr<std::unique_ptr<InvalidationLink>> Start(
      InvalidationLinkOptions options, InvalidationEvents events);
  ~InvalidationLink();  // stops the thread; no event is reported after

  InvalidationLink(const InvalidationLink&) = delete;
  InvalidationLink& operator=(const InvalidationLink&) = delete;

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const { redisFree(c); }
  };
  using Context = std::unique_ptr<redisContext, ContextDeleter>;

  InvalidationLink(InvalidationLinkOptions options, InvalidationEvents events,
                   int wake_fd)
      : options_(std::move(options)),
        events_(std::move(events)),
        wake_fd_(wake_fd) {}

  // Opens, asks CLIENT ID and subscribes; then reports `up`.
  absl::Status Connect();
  void Run();
  // Reads until the link is lost (false) or Stop (true).
  bool Serve();
  // Applies every reply already read; false on a protocol error.
  bool Drain();
  // Sends a PING (answered even in subscribed mode); false if it fails.
  bool Ping();
  // Waits up to `timeout` for the connection (when open) or a stop.
  enum class Wait { kReadable, kTimeout, kStop };
  Wait WaitFor(absl::Duration timeout, bool with_connection);

  const InvalidationLinkOptions options_;
  const InvalidationEvents events_;
  const int wake_fd_;  // an eventfd the destructor writes to
  std::atomic<bool> stop_{false};
  Context context_;  // the reader thread's (Connect's, before it starts)
  bool ping_outstanding_ = false;
  std::thread thread_;
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_EXAMPLES_NEAR_CACHE_INVALIDATION_LINK_H_
