// The gRPC request handlers on arbitrary requests, as a remote client could
// send them: the first byte picks the RPC, the rest is its protobuf.  The
// task manager is not started, so accepted tasks are journaled but never
// launched.  Every request must get an answer, never a crash.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "daemon/control_service.h"
#include "daemon/event_log.h"
#include "daemon/journal.h"
#include "daemon/task_manager.h"

namespace {

struct Harness {
  Harness() {
    char pattern[] = "/tmp/freeride-fuzz-api-XXXXXX";
    dir = mkdtemp(pattern);
    options.socket_path = dir + "/d.sock";
    options.state_dir = dir;
    options.lanes.push_back({0, "cpu:0", 8ull << 30, -1});
    std::string error;
    std::vector<std::string> notes;
    if (!journal.Open(dir + "/journal.db", {}, &notes).ok() ||
        !events.Open(dir + "/events.jsonl", &error))
      std::abort();
    tasks = std::make_unique<freeride::TaskManager>(options, &journal, &events);
    service = std::make_unique<freeride::ControlService>(tasks.get(), &lanes, dir);
  }
  // The journal and event log of every run would otherwise pile up in /tmp.
  ~Harness() {
    service.reset();
    tasks.reset();
    journal.Close();
    events.Close();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::string dir;
  freeride::DaemonOptions options;
  freeride::Journal journal;
  freeride::EventLog events;
  std::unique_ptr<freeride::TaskManager> tasks;
  std::vector<std::unique_ptr<freeride::Lane>> lanes;  // none: AttachStage is refused
  std::unique_ptr<freeride::ControlService> service;
};

template <typename Request>
bool Parse(Request* request, const uint8_t* data, size_t size) {
  return request->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness harness;
  Harness* h = &harness;
  if (size == 0) return 0;
  const uint8_t rpc = data[0] % 6;
  ++data;
  --size;
  grpc::ServerContext context;
  freeride::ControlService& s = *h->service;
  switch (rpc) {
    case 0: {
      freeride::v1::SubmitRequest request;
      freeride::v1::SubmitReply reply;
      if (Parse(&request, data, size)) s.Submit(&context, &request, &reply);
      break;
    }
    case 1: {
      freeride::v1::ListTasksRequest request;
      freeride::v1::ListTasksReply reply;
      if (Parse(&request, data, size)) s.ListTasks(&context, &request, &reply);
      break;
    }
    case 2: {
      freeride::v1::GetTaskRequest request;
      freeride::v1::TaskInfo reply;
      if (Parse(&request, data, size)) s.GetTask(&context, &request, &reply);
      break;
    }
    case 3: {
      freeride::v1::CancelRequest request;
      freeride::v1::CancelReply reply;
      if (Parse(&request, data, size)) s.Cancel(&context, &request, &reply);
      break;
    }
    case 4: {
      freeride::v1::AttachStageRequest request;
      freeride::v1::AttachStageReply reply;
      if (Parse(&request, data, size)) s.AttachStage(&context, &request, &reply);
      break;
    }
    case 5: {
      freeride::v1::StatsRequest request;
      freeride::v1::StatsReply reply;
      if (Parse(&request, data, size)) s.GetStats(&context, &request, &reply);
      break;
    }
  }
  return 0;
}
