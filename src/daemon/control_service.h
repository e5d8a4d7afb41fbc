// The gRPC control API: a thin translation between RPCs and TaskManager /
// lanes.  Every handler validates its input and maps errors to gRPC codes;
// none can bring the daemon down.  Handlers run on gRPC's threads, any
// number at once, and each checks Authorize first.
#pragma once
#include <memory>
#include <vector>

#include "base/env.h"
#include "daemon/lane.h"
#include "daemon/task_manager.h"
#include "freeride.grpc.pb.h"

namespace freeride {

// The tokens TCP peers may carry: `full` allows every call; `read_only`
// allows only the calls that read (GetStats, ListTasks, GetTask), for
// monitors and the cluster view.  Either may be empty (not accepted).
struct TcpTokens {
  std::string full;
  std::string read_only;
};

class ControlService final : public v1::FreeRide::Service {
 public:
  // With a token in `tokens`, requests from TCP peers must carry one (see
  // Authorize); requests over the Unix socket (mode 0600, the daemon's own
  // user) need none.
  // With `remote_only`, every peer counts as a TCP peer (the service behind
  // the TCP gate, whose peers all come through a local relay).  Its uptime
  // is on `env`'s clock.  `tasks`, `lanes` and `env` outlive the service.
  // GetStats reports `state_dir` and `mps_pipe_dir` (the MPS server GPU
  // lanes' tasks join; empty: none), which trainers are to join too.
  ControlService(TaskManager* tasks, const std::vector<std::unique_ptr<Lane>>* lanes,
                 std::string state_dir, std::string mps_pipe_dir = "", TcpTokens tokens = {},
                 bool remote_only = false, Env* env = Env::Default());

  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitRequest*, v1::SubmitReply*) override;
  grpc::Status ListTasks(grpc::ServerContext*, const v1::ListTasksRequest*,
                         v1::ListTasksReply*) override;
  grpc::Status GetTask(grpc::ServerContext*, const v1::GetTaskRequest*, v1::TaskInfo*) override;
  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest*, v1::CancelReply*) override;
  grpc::Status AttachStage(grpc::ServerContext*, const v1::AttachStageRequest*,
                           v1::AttachStageReply*) override;
  grpc::Status GetStats(grpc::ServerContext*, const v1::StatsRequest*, v1::StatsReply*) override;

  // What GetStats answers, for in-process readers such as /metrics.  Any
  // thread.
  void FillStats(v1::StatsReply* reply) const;

 private:
  enum class Access { kRead, kWrite };
  // OK for Unix-socket peers and for TCP peers whose "authorization"
  // metadata is "Bearer <full token>", or "Bearer <read-only token>" for
  // kRead; PERMISSION_DENIED for the read-only token on a kWrite call;
  // UNAUTHENTICATED otherwise.
  grpc::Status Authorize(const grpc::ServerContext* context, Access access) const;
  // Whether the peer came over TCP (or anything but the Unix socket).
  bool IsRemote(const grpc::ServerContext* context) const;

  TaskManager* tasks_;
  const std::vector<std::unique_ptr<Lane>>* lanes_;
  std::string state_dir_;
  std::string mps_pipe_dir_;
  TcpTokens tokens_;
  bool remote_only_;
  Env* const env_;
  Nanos started_ns_;
};

// The gRPC status with `status`'s code and message.
grpc::Status ToGrpc(const Status& status);

// Tasks in one ListTasks page: at most this many, and about this many bytes
// (a page holds at least one task), well under gRPC's 4 MiB message limit.
inline constexpr int kListPageTasks = 1000;
inline constexpr size_t kListPageBytes = 1 << 20;

}  // namespace freeride
