#include "daemon/control_service.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "client/client.h"

namespace freeride {

grpc::Status ToGrpc(const Status& status) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::OK;
  switch (status.code) {
    case ErrorCode::kOk: return grpc::Status::OK;
    case ErrorCode::kInvalidArgument: code = StatusCode::INVALID_ARGUMENT; break;
    case ErrorCode::kNotFound: code = StatusCode::NOT_FOUND; break;
    case ErrorCode::kAlreadyExists: code = StatusCode::ALREADY_EXISTS; break;
    case ErrorCode::kResourceExhausted: code = StatusCode::RESOURCE_EXHAUSTED; break;
    case ErrorCode::kFailedPrecondition: code = StatusCode::FAILED_PRECONDITION; break;
    case ErrorCode::kUnavailable: code = StatusCode::UNAVAILABLE; break;
    case ErrorCode::kDataLoss: code = StatusCode::DATA_LOSS; break;
  }
  return grpc::Status(code, status.message);
}

ControlService::ControlService(TaskManager* tasks, const std::vector<std::unique_ptr<Lane>>* lanes,
                               std::string state_dir, std::string mps_pipe_dir,
                               TcpTokens tokens, bool remote_only, Env* env)
    : tasks_(tasks),
      lanes_(lanes),
      state_dir_(std::move(state_dir)),
      mps_pipe_dir_(std::move(mps_pipe_dir)),
      tokens_(std::move(tokens)),
      remote_only_(remote_only),
      env_(env),
      started_ns_(env->Now()) {}

namespace {

// Compares in time independent of where the strings differ.
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // a token's length is not the secret
  unsigned char differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

}  // namespace

bool ControlService::IsRemote(const grpc::ServerContext* context) const {
  return remote_only_ || context->peer().rfind("unix:", 0) != 0;
}

grpc::Status ControlService::Authorize(const grpc::ServerContext* context, Access access) const {
  if ((tokens_.full.empty() && tokens_.read_only.empty()) || !IsRemote(context))
    return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kAuthorizationKey);
  if (it == metadata.end())
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this daemon needs its token over TCP: pass --token-file");
  std::string_view given(it->second.data(), it->second.size());
  // Both compared every time, so the time taken does not tell which matched.
  bool full = !tokens_.full.empty() && SameSecret(given, "Bearer " + tokens_.full);
  bool read = !tokens_.read_only.empty() && SameSecret(given, "Bearer " + tokens_.read_only);
  if (full || (read && access == Access::kRead)) return grpc::Status::OK;
  if (read)
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "this token may only read (status, show, the cluster view); submitting, "
                        "cancelling and attaching a stage need the daemon's full token");
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
}

grpc::Status ControlService::Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                                    v1::SubmitReply* reply) {
  if (grpc::Status denied = Authorize(context, Access::kWrite); !denied.ok()) return denied;
  grpc::Status status = ToGrpc(tasks_->Submit(request->spec(), reply->mutable_task()));
  reply->mutable_task()->mutable_spec()->clear_env();  // the submitter has it
  return status;
}

grpc::Status ControlService::ListTasks(grpc::ServerContext* context, const v1::ListTasksRequest* request,
                                       v1::ListTasksReply* reply) {
  if (grpc::Status denied = Authorize(context, Access::kRead); !denied.ok()) return denied;
  int page = request->page_size() > 0 ? std::min(request->page_size(), kListPageTasks)
                                      : kListPageTasks;
  // One more than the page, to know whether another page follows.
  std::vector<v1::TaskInfo> tasks =
      tasks_->List(request->include_ended(), request->after_id(), static_cast<size_t>(page) + 1);
  size_t bytes = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    v1::TaskInfo& info = tasks[i];
    info.mutable_spec()->clear_env();
    info.clear_stderr_tail();
    bytes += info.ByteSizeLong();
    bool full = i == static_cast<size_t>(page) || (i > 0 && bytes > kListPageBytes);
    if (full) {
      reply->set_next_after_id(reply->tasks(reply->tasks_size() - 1).id());
      break;
    }
    *reply->add_tasks() = std::move(info);
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request,
                                     v1::TaskInfo* reply) {
  if (grpc::Status denied = Authorize(context, Access::kRead); !denied.ok()) return denied;
  if (request->id() <= 0 && request->name().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give a task id or a name");
  grpc::Status status = ToGrpc(tasks_->Get(request->id(), request->name(), reply));
  // A token holder is not the submitter: environments hold secrets.
  if (IsRemote(context)) reply->mutable_spec()->clear_env();
  return status;
}

grpc::Status ControlService::Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                                    v1::CancelReply* reply) {
  if (grpc::Status denied = Authorize(context, Access::kWrite); !denied.ok()) return denied;
  if (request->id() <= 0 && request->name().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give a task id or a name");
  grpc::Status status = ToGrpc(tasks_->Cancel(request->id(), request->name(), reply->mutable_task()));
  reply->mutable_task()->mutable_spec()->clear_env();
  return status;
}

grpc::Status ControlService::AttachStage(grpc::ServerContext* context,
                                         const v1::AttachStageRequest* request,
                                         v1::AttachStageReply* reply) {
  if (grpc::Status denied = Authorize(context, Access::kWrite); !denied.ok()) return denied;
  if (request->lane() < 0 || request->lane() >= static_cast<int>(lanes_->size()))
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        fmt::format("lane {} does not exist; this daemon has lanes 0..{}",
                                    request->lane(), static_cast<int>(lanes_->size()) - 1));
  Lane& lane = *(*lanes_)[request->lane()];
  lane.NoteStage(request->pid(), request->rank(), request->label());
  reply->set_segment_path(lane.segment_path());
  return grpc::Status::OK;
}

grpc::Status ControlService::GetStats(grpc::ServerContext* context, const v1::StatsRequest*,
                                      v1::StatsReply* reply) {
  if (grpc::Status denied = Authorize(context, Access::kRead); !denied.ok()) return denied;
  FillStats(reply);
  return grpc::Status::OK;
}

void ControlService::FillStats(v1::StatsReply* reply) const {
  for (const auto& lane : *lanes_) lane->FillStats(reply->add_lanes());
  reply->set_daemon_pid(getpid());
  reply->set_uptime_ns(env_->Now() - started_ns_);
  reply->set_state_dir(state_dir_);
  reply->set_mps_pipe_dir(mps_pipe_dir_);
  reply->set_version(FREERIDE_VERSION);
}

}  // namespace freeride
