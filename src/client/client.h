// Connecting to a node daemon's control API.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "freeride.grpc.pb.h"

namespace freeride {

// Where a client finds the daemon: its Unix socket on this node, or a TCP
// address with the token the daemon was started with.
struct DaemonEndpoint {
  std::string socket_path;  // used when server is empty
  std::string server;       // HOST:PORT of a daemon started with --listen
  std::string token;        // sent to a TCP daemon as "authorization: Bearer <token>"
  std::string tls_ca_file;  // non-empty: TLS to the server, verified against this CA
  // "the daemon at <socket or server>", for messages.
  std::string Describe() const;
};

// The metadata key that carries the token.
inline constexpr char kAuthorizationKey[] = "authorization";

// Reads a token file: its first line, whitespace trimmed.  Refuses (nullopt
// and *error) a missing or unreadable file, a token under 16 characters, and
// a file that group or others may read: a token is a password.
std::optional<std::string> ReadTokenFile(const std::string& path, std::string* error);

// A stub for the daemon at the endpoint.  Returns nullptr and a message when
// no daemon socket exists there, or the TLS CA cannot be read.
std::unique_ptr<v1::FreeRide::Stub> ConnectToDaemon(const DaemonEndpoint& endpoint,
                                                    std::string* error);
std::unique_ptr<v1::FreeRide::Stub> ConnectToDaemon(const std::string& socket_path,
                                                    std::string* error);

// Sets a deadline on a client context.
void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds timeout);

// Sets the deadline and, for a TCP daemon, the token.
void PrepareContext(grpc::ClientContext* context, const DaemonEndpoint& endpoint,
                    std::chrono::milliseconds timeout);

// Every task (ended ones too with include_ended), fetched page by page into
// out->tasks, each page's call with its own `timeout`.
grpc::Status ListAllTasks(v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint,
                          bool include_ended, std::chrono::milliseconds timeout,
                          v1::ListTasksReply* out);

// A message for a failed RPC that tells the user what to do.
std::string DescribeRpcError(const grpc::Status& status, const DaemonEndpoint& endpoint);
std::string DescribeRpcError(const grpc::Status& status, const std::string& socket_path);

}  // namespace freeride
