#include "client/client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

namespace freeride {

std::unique_ptr<v1::FreeRide::Stub> ConnectToDaemon(const std::string& socket_path,
                                                    std::string* error) {
  struct stat st;
  if (stat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    *error = fmt::format("no FreeRide daemon at {}; start one with `freeride daemon` "
                         "(or pass the same --socket to both)",
                         socket_path);
    return nullptr;
  }
  auto channel = grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials());
  return v1::FreeRide::NewStub(channel);
}

void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds timeout) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

std::string DescribeRpcError(const grpc::Status& status, const std::string& socket_path) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return fmt::format("the daemon at {} is not answering ({}); is it running?", socket_path,
                         status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return fmt::format("the daemon at {} did not answer in time", socket_path);
    default:
      return status.error_message();
  }
}

}  // namespace freeride
