#include "daemon/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/files.h"
#include "base/paths.h"
#include "base/say.h"

namespace freeride {

namespace {

// Up to the hard limit: descriptors are what a flood of connections takes,
// and the soft limit (often 1024) is far below what the machine allows.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

Daemon::Daemon(DaemonOptions options, Env* env)
    : options_(std::move(options)), env_(env), gate_(env) {}

Daemon::~Daemon() { Shutdown(); }

bool Daemon::PrepareSocket(std::string* error) {
  std::string dir = std::filesystem::path(options_.socket_path).parent_path().string();
  if (!dir.empty() && !MakeDirs(dir, 0700, error)) return false;
  if (options_.socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    *error = fmt::format("socket path {} is longer than {} characters", options_.socket_path,
                         sizeof(sockaddr_un::sun_path) - 1);
    return false;
  }
  struct stat st;
  if (lstat(options_.socket_path.c_str(), &st) != 0) return true;
  if (!S_ISSOCK(st.st_mode)) {
    *error = fmt::format("{} exists and is not a socket; refusing to replace it",
                         options_.socket_path);
    return false;
  }
  // A socket file is left behind by a daemon that was killed.  If something
  // still answers on it, another daemon owns it.
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, options_.socket_path.c_str(), sizeof(addr.sun_path) - 1);
  bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live) {
    *error = fmt::format("another daemon is listening on {}", options_.socket_path);
    return false;
  }
  unlink(options_.socket_path.c_str());
  return true;
}

bool Daemon::PrepareCgroups(std::vector<std::string>* notes, std::string* error) {
  int leftovers = 0;
  std::string why;
  std::string instance = std::filesystem::absolute(options_.state_dir).lexically_normal().string();
  if (!cgroups_.Open(instance, &leftovers, &why)) {
    notes->push_back(fmt::format(
        "warning: tasks do not get cgroups ({}): a task's processes that leave its process "
        "group are neither stopped between bubbles nor killed with it or with the daemon",
        why));
    return true;
  }
  if (leftovers > 0)
    notes->push_back(fmt::format("killed the processes that {} tasks of a killed daemon left",
                                 leftovers));
  return cgroups_.StartDeathGuard(error);
}

bool Daemon::TcpCredentials(std::shared_ptr<grpc::ServerCredentials>* credentials,
                            std::string* error) const {
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    *error = "TLS needs both --tls-cert and --tls-key";
    return false;
  }
  if (options_.tls_cert_file.empty()) {
    *credentials = grpc::InsecureServerCredentials();
    return true;
  }
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = ReadWholeFile(options_.tls_cert_file).value_or("");
  pair.private_key = ReadWholeFile(options_.tls_key_file).value_or("");
  if (pair.cert_chain.empty() || pair.private_key.empty()) {
    *error = fmt::format("cannot read the TLS certificate {} or key {}", options_.tls_cert_file,
                         options_.tls_key_file);
    return false;
  }
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back(pair);
  *credentials = grpc::SslServerCredentials(ssl);
  return true;
}

bool Daemon::StartTcp(std::string* error) {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (!TcpCredentials(&credentials, error)) return false;
  remote_service_ = std::make_unique<ControlService>(
      tasks_.get(), &lanes_, options_.state_dir, options_.mps_pipe_dir,
      TcpTokens{options_.token, options_.read_token}, /*remote_only=*/true, env_);
  std::random_device random;
  std::string backend = fmt::format("freeride-{}-{:08x}", getpid(), random());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix-abstract:" + backend, credentials);
  builder.RegisterService(remote_service_.get());
  tcp_server_ = builder.BuildAndStart();
  if (!tcp_server_) {
    *error = fmt::format("cannot start the TCP control server for {}", options_.listen_address);
    return false;
  }
  TcpGateLimits limits;
  limits.max_connections = options_.max_tcp_connections;
  limits.max_per_peer = options_.max_tcp_connections_per_peer;
  if (!gate_.Start(options_.listen_address, backend, limits, error)) return false;
  tcp_port_ = gate_.port();
  return true;
}

bool Daemon::Start(std::string* error) {
  RaiseDescriptorLimit();
  if (options_.lanes.empty()) {
    *error = "no lanes: give --gpus or --cpu-lanes";
    return false;
  }
  umask(077);
  if (!MakeDirs(options_.state_dir + "/tasks", 0700, error)) return false;
  std::string lock_path = options_.state_dir + "/daemon.lock";
  lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    *error = fmt::format("cannot use the state directory {}: cannot open {}: {}",
                         options_.state_dir, lock_path, std::strerror(errno));
    return false;
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      // The holder wrote its pid beneath the lock: name it, so that whoever
      // started a second daemon (by hand, or Slurm or Kubernetes twice on one
      // node) sees which one runs.
      char holder[32] = {};
      ssize_t n = pread(lock_fd_, holder, sizeof(holder) - 1, 0);
      long pid = n > 0 ? std::strtol(holder, nullptr, 10) : 0;
      *error = fmt::format("state directory {} is in use by another daemon{}", options_.state_dir,
                           pid > 0 ? fmt::format(" (pid {})", pid) : "");
    } else {
      *error = fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno));
    }
    close(lock_fd_);
    lock_fd_ = -1;
    return false;
  }
  // Only a refused second start's message reads the pid: a failed write costs nothing else.
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock_fd_, 0) == 0) (void)!pwrite(lock_fd_, pid.data(), pid.size(), 0);
  if (!PrepareSocket(error)) return false;
  JournalOptions journal_options;
  journal_options.accept_loss = options_.accept_journal_loss;
  if (Status opened = journal_.Open(options_.state_dir + "/journal.db", journal_options,
                                    &recovery_notes_);
      !opened.ok()) {
    *error = opened.message;
    return false;
  }
  if (!events_.Open(options_.state_dir + "/events.jsonl", error,
                    {options_.event_log_max_bytes, options_.event_log_keep}))
    return false;

  std::vector<std::string> cgroup_notes;
  if (!PrepareCgroups(&cgroup_notes, error)) return false;
  tasks_ = std::make_unique<TaskManager>(options_, &journal_, &events_, &cgroups_, env_);
  if (Status recovered = tasks_->Recover(&recovery_notes_); !recovered.ok()) {
    *error = recovered.message;
    return false;
  }
  recovery_notes_.insert(recovery_notes_.end(), cgroup_notes.begin(), cgroup_notes.end());
  probe_schedule_ = std::make_unique<SharedProbeSchedule>(options_.probe);
  for (const LaneConfig& config : options_.lanes) {
    // A lane waits on words that stage and task processes wake through the
    // kernel, so it keeps the real Env even when a test gives the daemon a
    // fake; tests/virtual_lane.h runs a lane on fake time with in-process tasks.
    auto lane = std::make_unique<Lane>(config, options_, tasks_.get(), &events_,
                                       probe_schedule_.get(), Env::Default());
    if (!lane->Open(error)) return false;
    lanes_.push_back(std::move(lane));
  }
  if (!options_.listen_address.empty() && options_.token.empty() && options_.read_token.empty()) {
    *error = "the control API on TCP needs a token (--token-file, or --read-token-file to only read)";
    return false;
  }
  if (!options_.token.empty() && options_.token == options_.read_token) {
    *error = "the read-only token is the full token: give it a token of its own";
    return false;
  }
  service_ = std::make_unique<ControlService>(
      tasks_.get(), &lanes_, options_.state_dir, options_.mps_pipe_dir,
      TcpTokens{options_.token, options_.read_token}, /*remote_only=*/false, env_);
  // Before the control socket: a bad --metrics address then stops the start
  // with nothing listening.
  if (!options_.metrics_address.empty()) {
    metrics_ = std::make_unique<MetricsServer>();
    auto render = [this] {
      v1::StatsReply stats;
      service_->FillStats(&stats);
      return RenderPrometheusMetrics(stats, tasks_->List(/*include_ended=*/true));
    };
    if (!metrics_->Start(options_.metrics_address, render, error)) return false;
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + options_.socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    *error = fmt::format("cannot listen on {}", options_.socket_path);
    return false;
  }
  if (!options_.listen_address.empty() && !StartTcp(error)) return false;
  chmod(options_.socket_path.c_str(), 0600);
  tasks_->Start();
  for (auto& lane : lanes_) lane->Start();
  nlohmann::json lanes = nlohmann::json::array();
  for (const LaneConfig& l : options_.lanes) lanes.push_back(l.device);
  events_.Emit({{"type", "daemon"},
                {"event", "start"},
                {"ts_ns", env_->Now()},
                {"pid", getpid()},
                {"lanes", lanes},
                {"notes", recovery_notes_}});
  started_ = true;
  return true;
}

void Daemon::Shutdown() {
  if (!started_) {
    gate_.Stop();
    if (tcp_server_) tcp_server_->Shutdown();
    if (server_) server_->Shutdown();
    tcp_server_.reset();
    server_.reset();
    cgroups_.Close();
    if (lock_fd_ >= 0) close(lock_fd_);
    lock_fd_ = -1;
    return;
  }
  started_ = false;
  if (metrics_) metrics_->Stop();
  gate_.Stop();
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  if (tcp_server_) tcp_server_->Shutdown(deadline);
  if (server_) server_->Shutdown(deadline);
  for (auto& lane : lanes_) lane->Stop();
  tasks_->Shutdown(5 * kSecond);
  cgroups_.Close();
  events_.Emit({{"type", "daemon"}, {"event", "stop"}, {"ts_ns", env_->Now()}});
  events_.Close();
  if (Status closed = journal_.Close(); !closed.ok())
    Say(stderr, "freeride daemon: {}\n", closed.message);
  for (auto& lane : lanes_) lane->RemoveFiles();
  unlink(options_.socket_path.c_str());
  if (lock_fd_ >= 0) close(lock_fd_);
  lock_fd_ = -1;
}

}  // namespace freeride
