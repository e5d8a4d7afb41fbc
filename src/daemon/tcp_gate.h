// The control API's TCP front door.
//
// gRPC 1.51 stops accepting on a listener for good once accept4 fails with
// EMFILE, so a flood of idle connections could leave the daemon deaf until
// restarted.  TCP connections therefore never reach a gRPC listener
// directly: the gate accepts them within limits (per peer address, in all,
// and within the file descriptors the process may open) and relays each
// one's bytes, once it has sent some, to a gRPC server listening on a
// private abstract Unix socket (gRPC clients speak first; a connection that
// never does costs the gRPC server nothing).
// TLS, when configured, runs end to end through the relay.  Whatever the
// flood, the gate keeps accepting (and refusing) and the daemon's own
// descriptors stay within the limits.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/env.h"

namespace freeride {

struct TcpGateLimits {
  int max_connections = 256;  // relayed at once, from all peers
  int max_per_peer = 32;      // relayed at once from one address
  // A connection that sends nothing for this long after it was accepted is
  // closed: gRPC clients speak first.
  Nanos silent_timeout = 10 * kSecond;
};

// Start and Stop from one thread; the relaying runs on the gate's own.
class TcpGate {
 public:
  // Connections are timed on `env`'s clock; `env` outlives the gate.
  explicit TcpGate(Env* env = Env::Default()) : env_(env) {}
  ~TcpGate();
  TcpGate(const TcpGate&) = delete;
  TcpGate& operator=(const TcpGate&) = delete;

  // Listens on HOST:PORT (PORT 0: a free one) and relays to the abstract
  // Unix socket `backend` (its name, without the leading NUL).  The limit
  // in all is lowered to what RLIMIT_NOFILE leaves room for (three
  // descriptors a connection: the gate's two and gRPC's one).  Returns
  // false with *error when it cannot listen.  Call once.
  bool Start(const std::string& address, const std::string& backend, TcpGateLimits limits,
             std::string* error);
  // Closes the listener and every connection.  Idempotent.
  void Stop();

  // The port listened on, after Start (the one chosen for port 0).
  int port() const { return port_; }

 private:
  void Loop();

  Env* const env_;
  TcpGateLimits limits_;
  std::string backend_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  int open_ = 0;  // connections relayed; the loop thread only
  std::thread thread_;
};

}  // namespace freeride
