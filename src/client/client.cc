#include "client/client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <fstream>

#include "base/files.h"

namespace freeride {

std::string DaemonEndpoint::Describe() const {
  return "the daemon at " + (server.empty() ? socket_path : server);
}

std::optional<std::string> ReadTokenFile(const std::string& path, std::string* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = fmt::format("token file {} does not exist or is not a file", path);
    return std::nullopt;
  }
  if (st.st_mode & 077) {
    *error = fmt::format("token file {} may be read by others (mode {:o}); chmod 600 it", path,
                         st.st_mode & 0777);
    return std::nullopt;
  }
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {
    *error = fmt::format("cannot read a token from {}", path);
    return std::nullopt;
  }
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!token.empty() && blank(token.back())) token.pop_back();
  size_t first = 0;
  while (first < token.size() && blank(token[first])) ++first;
  token.erase(0, first);
  if (token.size() < 16) {
    *error = fmt::format("the token in {} is {} characters; use at least 16 (e.g. `openssl rand "
                         "-hex 32 > {}`)",
                         path, token.size(), path);
    return std::nullopt;
  }
  return token;
}

std::unique_ptr<v1::FreeRide::Stub> ConnectToDaemon(const DaemonEndpoint& endpoint,
                                                    std::string* error) {
  if (endpoint.server.empty()) return ConnectToDaemon(endpoint.socket_path, error);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!endpoint.tls_ca_file.empty()) {
    std::optional<std::string> ca = ReadWholeFile(endpoint.tls_ca_file);
    if (!ca || ca->empty()) {
      *error = fmt::format("cannot read the TLS CA certificate {}", endpoint.tls_ca_file);
      return nullptr;
    }
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = *ca;
    credentials = grpc::SslCredentials(options);
  }
  return v1::FreeRide::NewStub(grpc::CreateChannel(endpoint.server, credentials));
}

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

void PrepareContext(grpc::ClientContext* context, const DaemonEndpoint& endpoint,
                    std::chrono::milliseconds timeout) {
  SetDeadline(context, timeout);
  if (!endpoint.server.empty() && !endpoint.token.empty())
    context->AddMetadata(kAuthorizationKey, "Bearer " + endpoint.token);
}

grpc::Status ListAllTasks(v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint,
                          bool include_ended, std::chrono::milliseconds timeout,
                          v1::ListTasksReply* out) {
  v1::ListTasksRequest request;
  request.set_include_ended(include_ended);
  do {
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, timeout);
    v1::ListTasksReply page;
    grpc::Status status = stub.ListTasks(&context, request, &page);
    if (!status.ok()) return status;
    for (v1::TaskInfo& task : *page.mutable_tasks()) *out->add_tasks() = std::move(task);
    if (page.next_after_id() != 0 && page.next_after_id() <= request.after_id())
      return grpc::Status(grpc::StatusCode::INTERNAL, "the daemon's task pages do not advance");
    request.set_after_id(page.next_after_id());
  } while (request.after_id() != 0);
  return grpc::Status::OK;
}

std::string DescribeRpcError(const grpc::Status& status, const DaemonEndpoint& endpoint) {
  std::string where = endpoint.Describe();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return fmt::format("{} is not answering ({}); is it running?", where, status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return fmt::format("{} did not answer in time", where);
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return fmt::format("{} refused the request: {}", where, status.error_message());
    default:
      // A request the client could not even encode (protobuf refuses text
      // that is not UTF-8) fails with no message of its own.
      if (status.error_message().empty())
        return fmt::format("the request to {} failed with gRPC status {} and no message (a text that is not "
                           "valid UTF-8 cannot be sent)",
                           where, static_cast<int>(status.error_code()));
      return status.error_message();
  }
}

std::string DescribeRpcError(const grpc::Status& status, const std::string& socket_path) {
  DaemonEndpoint endpoint;
  endpoint.socket_path = socket_path;
  return DescribeRpcError(status, endpoint);
}

}  // namespace freeride
