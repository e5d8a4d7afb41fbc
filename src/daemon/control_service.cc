#include "daemon/control_service.h"

#include <fmt/format.h>
#include <unistd.h>

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
  }
  return grpc::Status(code, status.message);
}

ControlService::ControlService(TaskManager* tasks, const std::vector<std::unique_ptr<Lane>>* lanes,
                               std::string state_dir)
    : tasks_(tasks), lanes_(lanes), state_dir_(std::move(state_dir)), started_ns_(MonotonicNow()) {}

grpc::Status ControlService::Submit(grpc::ServerContext*, const v1::SubmitRequest* request,
                                    v1::SubmitReply* reply) {
  return ToGrpc(tasks_->Submit(request->spec(), reply->mutable_task()));
}

grpc::Status ControlService::ListTasks(grpc::ServerContext*, const v1::ListTasksRequest* request,
                                       v1::ListTasksReply* reply) {
  for (v1::TaskInfo& info : tasks_->List(request->include_ended()))
    *reply->add_tasks() = std::move(info);
  return grpc::Status::OK;
}

grpc::Status ControlService::GetTask(grpc::ServerContext*, const v1::GetTaskRequest* request,
                                     v1::TaskInfo* reply) {
  if (request->id() <= 0 && request->name().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give a task id or a name");
  return ToGrpc(tasks_->Get(request->id(), request->name(), reply));
}

grpc::Status ControlService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                    v1::CancelReply* reply) {
  if (request->id() <= 0 && request->name().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give a task id or a name");
  return ToGrpc(tasks_->Cancel(request->id(), request->name(), reply->mutable_task()));
}

grpc::Status ControlService::AttachStage(grpc::ServerContext*,
                                         const v1::AttachStageRequest* request,
                                         v1::AttachStageReply* reply) {
  if (request->lane() < 0 || request->lane() >= static_cast<int>(lanes_->size()))
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        fmt::format("lane {} does not exist; this daemon has lanes 0..{}",
                                    request->lane(), static_cast<int>(lanes_->size()) - 1));
  Lane& lane = *(*lanes_)[request->lane()];
  lane.NoteStage(request->pid(), request->rank(), request->label());
  reply->set_segment_path(lane.segment_path());
  return grpc::Status::OK;
}

grpc::Status ControlService::GetStats(grpc::ServerContext*, const v1::StatsRequest*,
                                      v1::StatsReply* reply) {
  FillStats(reply);
  return grpc::Status::OK;
}

void ControlService::FillStats(v1::StatsReply* reply) const {
  for (const auto& lane : *lanes_) lane->FillStats(reply->add_lanes());
  reply->set_daemon_pid(getpid());
  reply->set_uptime_ns(MonotonicNow() - started_ns_);
  reply->set_state_dir(state_dir_);
  reply->set_version(FREERIDE_VERSION);
}

}  // namespace freeride
