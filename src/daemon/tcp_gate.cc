#include "daemon/tcp_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <list>
#include <map>

namespace freeride {
namespace {

constexpr size_t kRelayChunk = 64 << 10;
// Descriptors kept for everything but relayed connections: the journal,
// logs, task files, segments and the local socket's clients.
constexpr rlim_t kReservedDescriptors = 512;
constexpr int kDescriptorsPerConnection = 3;

// One relayed connection: side 0 is the TCP client, side 1 the gRPC server
// (-1 until the client has sent its first bytes).
struct Relay {
  struct End {
    Relay* relay;
    int side;
  };
  int fd[2] = {-1, -1};
  std::string pending[2];  // bytes waiting to be written to fd[i]
  std::string peer;
  Nanos accepted_ns = 0;
  bool heard = false;  // the client has sent something
  End ends[2];
};

std::string PeerAddress(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  else if (address.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
              sizeof(text));
  return text;
}

int ConnectBackend(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  size_t length = std::min(name.size(), sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, name.data(), length);  // sun_path[0] == 0: abstract
  socklen_t size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), size) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// How many connections the descriptor limit leaves room for.
int DescriptorBudget() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  rlim_t spare = limit.rlim_cur > 2 * kReservedDescriptors ? limit.rlim_cur - kReservedDescriptors
                                                           : limit.rlim_cur / 2;
  return static_cast<int>(std::min<rlim_t>(spare / kDescriptorsPerConnection, 1 << 20));
}

}  // namespace

TcpGate::~TcpGate() { Stop(); }

bool TcpGate::Start(const std::string& address, const std::string& backend, TcpGateLimits limits,
                    std::string* error) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    *error = fmt::format("--listen {}: give HOST:PORT", address);
    return false;
  }
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    *error = fmt::format("cannot listen on {}: {}", address, gai_strerror(rc));
    return false;
  }
  int why = 0;
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd >= 0 && bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
    } else {
      why = errno;
      if (fd >= 0) close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    *error = fmt::format("cannot listen on {}: {}", address, std::strerror(why));
    return false;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  limits.max_connections = std::max(1, std::min(limits.max_connections, DescriptorBudget()));
  limits.max_per_peer = std::max(1, std::min(limits.max_per_peer, limits.max_connections));
  limits_ = limits;
  backend_ = backend;
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void TcpGate::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(wake_fd_);
  close(listen_fd_);
  wake_fd_ = listen_fd_ = -1;
}

void TcpGate::Loop() {
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  // A descriptor held back for the moment the process runs out: closed, it
  // lets one refused connection be accepted and closed, so that the backlog
  // drains instead of staying readable for ever.
  int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = &listen_fd_;
  epoll_ctl(epoll, EPOLL_CTL_ADD, listen_fd_, &event);
  event.data.ptr = &wake_fd_;
  epoll_ctl(epoll, EPOLL_CTL_ADD, wake_fd_, &event);

  std::list<Relay> relays;
  std::map<std::string, int> per_peer;
  auto watch = [&](Relay& r) {
    for (int side = 0; side < 2; ++side) {
      if (r.fd[side] < 0) continue;
      epoll_event e{};
      // Read a side only while what it sent last has gone on; write it
      // while something waits for it.
      e.events = (r.pending[1 - side].empty() ? EPOLLIN : 0u) |
                 (r.pending[side].empty() ? 0u : EPOLLOUT) | EPOLLRDHUP;
      e.data.ptr = &r.ends[side];
      epoll_ctl(epoll, EPOLL_CTL_MOD, r.fd[side], &e);
    }
  };
  auto drop = [&](std::list<Relay>::iterator it) {
    for (int fd : it->fd)
      if (fd >= 0) close(fd);  // also leaves the epoll set
    if (--per_peer[it->peer] == 0) per_peer.erase(it->peer);
    relays.erase(it);
    --open_;
  };
  auto accept_all = [&] {
    for (;;) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare >= 0) {
          close(spare);
          int refused = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (refused >= 0) close(refused);
          spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
          if (refused >= 0) continue;
        }
        return;  // EAGAIN, or nothing more to do now
      }
      std::string peer = PeerAddress(address);
      int& from_peer = per_peer[peer];
      if (open_ >= limits_.max_connections || from_peer >= limits_.max_per_peer) {
        close(fd);
        if (from_peer == 0) per_peer.erase(peer);
        continue;
      }
      ++from_peer;
      ++open_;
      Relay& r = relays.emplace_back();
      r.fd[0] = fd;
      r.peer = peer;
      r.accepted_ns = env_->Now();
      r.ends[0] = {&r, 0};
      r.ends[1] = {&r, 1};
      epoll_event e{};
      e.events = EPOLLIN | EPOLLRDHUP;
      e.data.ptr = &r.ends[0];
      epoll_ctl(epoll, EPOLL_CTL_ADD, r.fd[0], &e);
    }
  };
  // The gRPC side of a relay whose client has spoken: connected only then,
  // so that connections that never speak (a flood of idle ones, or ones
  // closed in the backlog) cost gRPC nothing; its listener, like the TCP
  // one, stops for good if it ever runs out of descriptors.  False when the
  // server cannot be reached.
  auto connect_backend = [&](Relay& r) {
    r.fd[1] = ConnectBackend(backend_);
    if (r.fd[1] < 0) return false;
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.ptr = &r.ends[1];
    epoll_ctl(epoll, EPOLL_CTL_ADD, r.fd[1], &e);
    return true;
  };
  // Moves bytes for one ready side; false when the relay is over.
  auto serve = [&](Relay& r, int side, uint32_t events) {
    if ((events & EPOLLOUT) && !r.pending[side].empty()) {
      ssize_t n = write(r.fd[side], r.pending[side].data(), r.pending[side].size());
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) r.pending[side].erase(0, static_cast<size_t>(n));
    }
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && r.pending[1 - side].empty()) {
      char buffer[kRelayChunk];
      ssize_t n = read(r.fd[side], buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
      if (n > 0) {
        if (side == 0) r.heard = true;
        if (r.fd[1] < 0 && !connect_backend(r)) return false;
        ssize_t sent = write(r.fd[1 - side], buffer, static_cast<size_t>(n));
        if (sent < 0 && errno != EAGAIN && errno != EINTR) return false;
        sent = std::max<ssize_t>(sent, 0);
        r.pending[1 - side].assign(buffer + sent, static_cast<size_t>(n - sent));
      }
    }
    watch(r);
    return true;
  };

  epoll_event events[64];
  Nanos next_sweep = env_->Now() + kSecond;
  while (!stopping_) {
    int n = epoll_wait(epoll, events, 64, 1000);
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &wake_fd_) continue;
      if (tag == &listen_fd_) {
        accept_all();
        continue;
      }
      auto* end = static_cast<Relay::End*>(tag);
      if (!serve(*end->relay, end->side, events[i].events)) {
        // Later events of this round may name the relay: drop it after them.
        end->relay->accepted_ns = -1;
      }
    }
    Nanos now = env_->Now();
    bool sweep = now >= next_sweep;
    if (sweep) next_sweep = now + kSecond;
    for (auto it = relays.begin(); it != relays.end();) {
      auto current = it++;
      bool silent = sweep && !current->heard && now - current->accepted_ns > limits_.silent_timeout;
      if (current->accepted_ns < 0 || silent) drop(current);
    }
  }
  while (!relays.empty()) drop(relays.begin());
  if (spare >= 0) close(spare);
  close(epoll);
}

}  // namespace freeride
