// Connecting to a node daemon's control API.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "freeride.grpc.pb.h"

namespace freeride {

// A stub for the daemon at socket_path.  Returns nullptr and a message when
// no daemon socket exists there.
std::unique_ptr<v1::FreeRide::Stub> ConnectToDaemon(const std::string& socket_path,
                                                    std::string* error);

// Sets a deadline on a client context.
void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds timeout);

// A message for a failed RPC that tells the user what to do.
std::string DescribeRpcError(const grpc::Status& status, const std::string& socket_path);

}  // namespace freeride
