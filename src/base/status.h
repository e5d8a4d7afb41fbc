// The outcome of an operation that can fail: a code for programs and a
// message for people.  Callers on any thread; it is a plain value.
#pragma once
#include <string>

namespace freeride {

enum class ErrorCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kResourceExhausted,   // e.g. no lane has room, or the disk is full
  kFailedPrecondition,  // e.g. a read-only state directory
  kUnavailable,         // try again later (shutting down, I/O error)
  kDataLoss,            // stored data is damaged or missing
};

struct Status {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  bool ok() const { return code == ErrorCode::kOk; }
  static Status Ok() { return {}; }
};

}  // namespace freeride
