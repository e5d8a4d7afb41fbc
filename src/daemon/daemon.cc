#include "daemon/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/files.h"
#include "base/paths.h"

namespace freeride {

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {}

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

bool Daemon::Start(std::string* error) {
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
    *error = errno == EWOULDBLOCK
                 ? fmt::format("state directory {} is in use by another daemon", options_.state_dir)
                 : fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno));
    close(lock_fd_);
    lock_fd_ = -1;
    return false;
  }
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

  tasks_ = std::make_unique<TaskManager>(options_, &journal_, &events_);
  if (Status recovered = tasks_->Recover(&recovery_notes_); !recovered.ok()) {
    *error = recovered.message;
    return false;
  }
  probe_schedule_ = std::make_unique<SharedProbeSchedule>(options_.probe);
  for (const LaneConfig& config : options_.lanes) {
    auto lane =
        std::make_unique<Lane>(config, options_, tasks_.get(), &events_, probe_schedule_.get());
    if (!lane->Open(error)) return false;
    lanes_.push_back(std::move(lane));
  }
  if (!options_.listen_address.empty() && options_.token.empty()) {
    *error = "the control API on TCP needs a token (--token-file)";
    return false;
  }
  service_ = std::make_unique<ControlService>(tasks_.get(), &lanes_, options_.state_dir,
                                              options_.token);
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
  if (!options_.listen_address.empty()) {
    std::shared_ptr<grpc::ServerCredentials> credentials;
    if (!TcpCredentials(&credentials, error)) return false;
    builder.AddListeningPort(options_.listen_address, credentials, &tcp_port_);
  }
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || (!options_.listen_address.empty() && tcp_port_ == 0)) {
    *error = options_.listen_address.empty()
                 ? fmt::format("cannot listen on {}", options_.socket_path)
                 : fmt::format("cannot listen on {} or {}", options_.socket_path,
                               options_.listen_address);
    if (server_) server_->Shutdown();
    server_.reset();
    return false;
  }
  chmod(options_.socket_path.c_str(), 0600);
  tasks_->Start();
  for (auto& lane : lanes_) lane->Start();
  nlohmann::json lanes = nlohmann::json::array();
  for (const LaneConfig& l : options_.lanes) lanes.push_back(l.device);
  events_.Emit({{"type", "daemon"},
                {"event", "start"},
                {"ts_ns", MonotonicNow()},
                {"pid", getpid()},
                {"lanes", lanes},
                {"notes", recovery_notes_}});
  started_ = true;
  return true;
}

void Daemon::Shutdown() {
  if (!started_) {
    if (lock_fd_ >= 0) close(lock_fd_);
    lock_fd_ = -1;
    return;
  }
  started_ = false;
  if (metrics_) metrics_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  for (auto& lane : lanes_) lane->Stop();
  tasks_->Shutdown(5 * kSecond);
  events_.Emit({{"type", "daemon"}, {"event", "stop"}, {"ts_ns", MonotonicNow()}});
  events_.Close();
  if (Status closed = journal_.Close(); !closed.ok())
    fmt::print(stderr, "freeride daemon: {}\n", closed.message);
  for (auto& lane : lanes_) unlink(lane->segment_path().c_str());
  unlink(options_.socket_path.c_str());
  if (lock_fd_ >= 0) close(lock_fd_);
  lock_fd_ = -1;
}

}  // namespace freeride
