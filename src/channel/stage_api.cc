// The stage side of the C ABI.  Everything after freeride_stage_open is on
// the training job's hot path: no allocation, no blocking calls.  A mark
// takes the stage's marks_mutex, which only a mark written at the same
// moment by another thread of the stage (a host function, the gate marks'
// watcher) holds.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "base/clock.h"
#include "base/paths.h"
#include "base/settings.h"
#include "channel/stage_handle.h"

using freeride::MonotonicNow;
using freeride::Nanos;

namespace {

constexpr Nanos kAttachRetryInterval = freeride::kSecond;

// Maps the lane segment if a daemon has made one; drops a mapping whose file
// the daemon removed (clean shutdown).  At most once per retry interval, so
// the cost on the hot path is one clock read otherwise.
void MaybeReattach(freeride_stage* stage, Nanos now) {
  if (stage->disabled || now < stage->next_check_ns) return;
  stage->next_check_ns = now + kAttachRetryInterval;
  if (stage->segment.is_open()) {
    if (!stage->segment.mapping().Unlinked()) return;
    stage->segment.Close();
  }
  std::string error;
  if (stage->segment.Open(stage->segment_path, /*writable=*/true, &error)) {
    stage->segment.set_env(stage->env);
    stage->segment.layout()->stage_pid.store(getpid());
    stage->segment.layout()->stage_heartbeat_ns.store(now);
  }
}

// FREERIDE_GATE_WRITES: auto (the default), stream or memset; anything else
// is warned of and the default used.
int GateWriteModeFromEnvironment() {
  static_assert(FREERIDE_GATE_WRITE_AUTO == 0 && FREERIDE_GATE_WRITE_STREAM == 1 && FREERIDE_GATE_WRITE_MEMSET == 2,
                "the choices below are listed in the modes' order");
  return freeride::ChoiceSetting("freeride", "FREERIDE_GATE_WRITES", {"auto", "stream", "memset"},
                                 FREERIDE_GATE_WRITE_AUTO);
}

}  // namespace

freeride_stage* freeride::OpenStage(int lane, const char* socket_path, Env* env) {
  auto* stage = new (std::nothrow) freeride_stage();
  if (!stage) return nullptr;
  stage->env = env;
  stage->owner_pid = getpid();
  try {
    std::string socket = socket_path && *socket_path ? socket_path : freeride::DefaultSocketPath();
    stage->segment_path = freeride::LaneSegmentPath(socket, lane);
  } catch (...) {
    delete stage;
    return nullptr;
  }
  const char* disable = std::getenv("FREERIDE_DISABLE");
  stage->disabled = disable && *disable && std::string(disable) != "0";
  stage->gate_write_mode = GateWriteModeFromEnvironment();
  MaybeReattach(stage, env->Now());
  return stage;
}

extern "C" {

int freeride_abi_version(void) { return FREERIDE_ABI_VERSION; }

int64_t freeride_now_ns(void) { return MonotonicNow(); }

freeride_stage* freeride_stage_open(int lane, const char* socket_path) {
  return freeride::OpenStage(lane, socket_path, freeride::Env::Default());
}

int freeride_stage_attached(const freeride_stage* stage) {
  if (!stage) return 0;
  // The gate marks' thread may be mapping the segment again right now.
  std::lock_guard<std::mutex> lock(stage->marks_mutex);
  return stage->segment.is_open() ? 1 : 0;
}

void freeride_bubble_begin(freeride_stage* stage, uint32_t slot, int64_t predicted_ns,
                           uint64_t free_memory_bytes) {
  if (!stage) return;
  std::lock_guard<std::mutex> lock(stage->marks_mutex);
  MaybeReattach(stage, stage->env->Now());
  if (!stage->segment.is_open()) return;
  stage->segment.WriteBeginNow(slot, predicted_ns > 0 ? predicted_ns : 0, free_memory_bytes);
}

void freeride_bubble_end(freeride_stage* stage) {
  if (!stage) return;
  std::lock_guard<std::mutex> lock(stage->marks_mutex);
  if (!stage->segment.is_open()) return;
  stage->segment.WriteEndNow();
}

void freeride_stage_close(freeride_stage* stage) {
  if (!stage) return;
  if (stage->owner_pid != getpid()) {
    // A forked child's copy: the watcher's thread is its parent's, and so
    // is the lane; leave both alone (the watcher's memory is not freed).
    (void)stage->mark_watcher.release();
    delete stage;
    return;
  }
  if (stage->mark_watcher) {
    // Its last marks first: it writes them with the calls above.
    stage->mark_watcher->Stop();
    // The stream was synchronised (the contract), so a gate still open is
    // one no close will come for: side work must not run past the stage.
    if (stage->gate_state == 1 && stage->gate_page.is_open())
      stage->gate_page.CloseEarly(stage->gate_bubble);
  }
  {
    std::lock_guard<std::mutex> lock(stage->marks_mutex);
    // Only while the lane is still ours: a stage that took it since keeps
    // its pid (else the lane shows no stage while one marks) and its open
    // bubble (an end written here would end it, or, raced with its own end,
    // leave the lane's count showing a bubble open through its compute).
    int64_t mine = getpid();
    if (stage->segment.is_open() && stage->segment.layout()->stage_pid.load() == mine) {
      stage->segment.WriteEndNow();
      stage->segment.layout()->stage_pid.compare_exchange_strong(mine, 0);
    }
  }
  delete stage;
}

}  // extern "C"
