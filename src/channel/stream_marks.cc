// Stream-ordered bubble marks: the stage opens or closes the lane's GPU gate
// with a stream memory write, and its marks are read from the gate word by
// a watcher thread (gate_mark_watcher.h); where there is no gate, a CUDA
// host function writes the mark when the GPU stream reaches it.  libcuda is opened with
// dlopen on first use, so libfreeride builds and loads on machines with no
// CUDA at all.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "channel/stage_handle.h"
#include "gate/capture_mode.h"
#include "gate/driver_types.h"

namespace {

using freeride::PendingMark;

using CuResult = int;
using CuHostFn = void (*)(void*);
using CuLaunchHostFn = CuResult (*)(void* stream, CuHostFn fn, void* user_data);
using CuStreamWriteValue32 = CuResult (*)(void* stream, unsigned long long address, uint32_t value,
                                          unsigned flags);
using CuStreamQuery = CuResult (*)(void* stream);
using CuMemsetD32Async = CuResult (*)(unsigned long long address, unsigned value, size_t count, void* stream);
using CuMemHostRegister = CuResult (*)(void* pointer, size_t bytes, unsigned flags);
using CuMemHostGetDevicePointer = CuResult (*)(unsigned long long* device, void* host, unsigned flags);

void* Driver() {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return lib;
}

template <typename Fn>
Fn DriverFn(const char* name) {
  void* lib = Driver();
  return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

CuLaunchHostFn LaunchHostFunc() {
  static CuLaunchHostFn fn = DriverFn<CuLaunchHostFn>("cuLaunchHostFunc");
  return fn;
}

void RunMark(void* user_data) {
  const PendingMark& mark = *static_cast<PendingMark*>(user_data);
  if (mark.begin)
    freeride_bubble_begin(mark.stage, mark.slot, mark.predicted_ns, mark.free_memory_bytes);
  else
    freeride_bubble_end(mark.stage);
}

int Enqueue(freeride_stage* stage, void* stream, const PendingMark& mark) {
  if (!stage) return 0;
  CuLaunchHostFn launch = LaunchHostFunc();
  if (!launch) return -1;
  PendingMark* record = &stage->pending_marks[stage->next_pending_mark++ % freeride::kPendingMarks];
  *record = mark;
  return launch(stream, RunMark, record) == 0 ? 0 : -1;
}

constexpr freeride::Nanos kGateRetryInterval = freeride::kSecond;
constexpr unsigned kHostRegisterPortableDeviceMap =
    freeride::gate::kHostRegisterPortable | freeride::gate::kHostRegisterDeviceMap;
constexpr CuResult kHostMemoryAlreadyRegistered = freeride::gate::kCudaErrorHostMemoryAlreadyRegistered;

// Maps and registers the lane's gate page, at most once per retry interval
// while it is missing (no daemon yet, or a CPU lane); drops a page whose
// file the daemon removed.  True when the gate can be written.
bool GateReady(freeride_stage* stage) {
  if (stage->disabled) return false;
  freeride::Nanos now = stage->env->Now();
  if (stage->gate_state == 1) {
    if (now < stage->gate_retry_ns) return true;
    stage->gate_retry_ns = now + kGateRetryInterval;
    if (!stage->gate_page.mapping_unlinked()) return true;
    // The removed page stays mapped and registered for the process's life:
    // gate writes already queued on the compute stream still target it, and
    // unregistering or unmapping it under them could fault the training's
    // context.  4 KiB for each page a daemon removes.
    stage->retired_gate_pages.push_back(
        std::make_unique<freeride::GatePage>(std::move(stage->gate_page)));
    stage->gate_page = freeride::GatePage();
    stage->gate_state = 0;
  }
  if (stage->gate_state == -1 && now < stage->gate_retry_ns) return false;
  stage->gate_state = -1;
  stage->gate_retry_ns = now + kGateRetryInterval;
  static auto write = DriverFn<CuStreamWriteValue32>("cuStreamWriteValue32_v2");
  static auto host_register = DriverFn<CuMemHostRegister>("cuMemHostRegister_v2");
  static auto device_pointer = DriverFn<CuMemHostGetDevicePointer>("cuMemHostGetDevicePointer_v2");
  if (!write || !host_register || !device_pointer) return false;
  std::string error;
  if (!stage->gate_page.Open(stage->segment_path + "-gate", &error)) return false;
  CuResult r = host_register(stage->gate_page.page(), freeride::kGatePageBytes,
                             kHostRegisterPortableDeviceMap);
  unsigned long long word = 0;
  if ((r != 0 && r != kHostMemoryAlreadyRegistered) ||
      device_pointer(&word, stage->gate_page.page(), 0) != 0 || word == 0) {
    std::fprintf(stderr, "freeride: the lane's GPU gate cannot be registered (CUDA error %d); side "
                 "tasks are dispatched from the host\n", r);
    stage->gate_page.Close();
    return false;
  }
  stage->gate_word = word;
  stage->gate_page.layout()->stage_pid.store(getpid());
  stage->gate_state = 1;
  return true;
}

using CuStreamIsCapturing = CuResult (*)(void* stream, int* status);
using CuThreadExchangeStreamCaptureMode = CuResult (*)(int* mode);

// Where `stream` stands, for a gate write: done (no work left), busy, or
// not asked: capturing into a graph (also the legacy stream while a
// blocking stream is), or the driver could not say.  A capturing stream is
// never queried, as a query would end the capture.  The query (cuStreamIsCapturing, then cuStreamQuery
// in the relaxed capture mode so that another thread's capture is not
// disturbed: four driver calls, no GPU work) leaves one window: a thread
// that starts capturing a blocking stream between the two calls on the
// legacy stream has that capture ended.
enum class StreamState { kDone, kBusy, kNotAsked };
StreamState QueryStream(void* stream) {
  static auto is_capturing = DriverFn<CuStreamIsCapturing>("cuStreamIsCapturing");
  static auto exchange = DriverFn<CuThreadExchangeStreamCaptureMode>("cuThreadExchangeStreamCaptureMode");
  static auto query = DriverFn<CuStreamQuery>("cuStreamQuery");
  int capturing = 1;
  if (!is_capturing || !exchange || !query || is_capturing(stream, &capturing) != freeride::gate::kCudaSuccess ||
      capturing != freeride::gate::kCaptureStatusNone)
    return StreamState::kNotAsked;
  const freeride::gate::RelaxedCaptureMode relaxed(exchange);
  if (!relaxed.active()) return StreamState::kNotAsked;
  return query(stream) == freeride::gate::kCudaSuccess ? StreamState::kDone : StreamState::kBusy;
}

// Writes `value` to the lane's gate word where `stream` reaches this point,
// the gate ready (GateReady), as the stage's gate_write_mode says.  A stream
// with no work left is already there: the value is stored from the host at
// once, so the stream gets no memory operation (each one costs its stream
// microseconds, with its memory barrier, which a trainer that synchronises
// after every exchange waits for).  Only when every stream write since the
// last host store went on this same stream, now done, so that no earlier
// value can land after this one.  A stage whose stream writes went on two
// streams (it only ever asks about the stream it is given, which may be the
// only one alive), or on a stream it could not ask (one being captured into
// a graph is replayed later, perhaps many times), makes stream writes from
// then on.  0 when written or
// enqueued.
int EnqueueGateValue(freeride_stage* stage, void* stream, uint32_t value) {
  using GateWrites = freeride_stage::GateWrites;
  StreamState state = StreamState::kBusy;
  if (stage->gate_write_mode != FREERIDE_GATE_WRITE_STREAM &&
      (stage->gate_writes == GateWrites::kLanded ||
       (stage->gate_writes == GateWrites::kOnStream && stage->gate_pending_stream == stream))) {
    state = QueryStream(stream);
    if (state == StreamState::kDone) {
      stage->gate_writes = GateWrites::kLanded;
      stage->gate_pending_stream = nullptr;
      stage->gate_page.layout()->word.store(value, std::memory_order_seq_cst);
      ++stage->gate_writes_from_host;
      return 0;
    }
  }
  static auto write = DriverFn<CuStreamWriteValue32>("cuStreamWriteValue32_v2");
  static auto memset = DriverFn<CuMemsetD32Async>("cuMemsetD32Async");
  const CuResult r = stage->gate_write_mode == FREERIDE_GATE_WRITE_MEMSET && memset
                         ? memset(stage->gate_word, value, 1, stream)
                         : write(stream, stage->gate_word, value, 0);
  if (r != freeride::gate::kCudaSuccess) return -1;
  const bool another_stream = stage->gate_writes == GateWrites::kOnStream && stage->gate_pending_stream != stream;
  if (stage->gate_writes == GateWrites::kUntracked || another_stream || state == StreamState::kNotAsked) {
    stage->gate_writes = GateWrites::kUntracked;
    stage->gate_pending_stream = nullptr;
  } else {
    stage->gate_writes = GateWrites::kOnStream;
    stage->gate_pending_stream = stream;
  }
  ++stage->gate_writes_on_stream;
  return 0;
}

// Numbers the stage's next gate bubble: 31 bits, and never 0 (the gate
// marks' "none").  The number is used up even if its open is not enqueued.
uint32_t OpenNextGateBubble(freeride_stage* stage) {
  return stage->gate_bubble = freeride::GateMarkReader::Next(stage->gate_bubble);
}

// Enqueues the gate's open (of a new bubble) or close (of the last opened)
// on `stream`; *value gets the value written.  0 when enqueued.
int WriteGate(freeride_stage* stage, void* stream, bool open, uint32_t* value = nullptr) {
  if (!stage || !GateReady(stage)) return -1;
  const uint32_t written = open ? freeride::GateOpenValue(OpenNextGateBubble(stage))
                                : freeride::GateClosedValue(stage->gate_bubble);
  if (value) *value = written;
  return EnqueueGateValue(stage, stream, written);
}

bool GateMarksWanted() {
  static const bool wanted = [] {
    const char* text = std::getenv("FREERIDE_GATE_MARKS");
    return !(text && std::string(text) == "0");
  }();
  return wanted;
}

freeride::GateMarkWatcher* Watcher(freeride_stage* stage) {
  if (!stage->mark_watcher) {
    stage->mark_watcher = std::unique_ptr<freeride::GateMarkWatcher>(new (std::nothrow) freeride::GateMarkWatcher(
        stage->env, freeride::GateMarkWatcher::PollIntervalFromEnvironment(), stage->gate_bubble,
        [stage](const freeride::GateMark& mark) {
          if (mark.kind == freeride::GateMarkKind::kBegin)
            freeride_bubble_begin(stage, mark.slot, mark.predicted_ns, mark.free_memory_bytes);
          else
            freeride_bubble_end(stage);
        }));
  }
  return stage->mark_watcher.get();
}

}  // namespace

extern "C" {

int freeride_bubble_begin_on_stream(freeride_stage* stage, void* cuda_stream, uint32_t slot,
                                    int64_t predicted_ns, uint64_t free_memory_bytes) {
  return Enqueue(stage, cuda_stream, {stage, true, slot, predicted_ns, free_memory_bytes});
}

int freeride_bubble_end_on_stream(freeride_stage* stage, void* cuda_stream) {
  return Enqueue(stage, cuda_stream, {stage, false, 0, 0, 0});
}

int freeride_bubble_begin_gated(freeride_stage* stage, void* compute_stream, uint32_t slot,
                                int64_t predicted_ns, uint64_t free_memory_bytes) {
  if (!stage || stage->owner_pid != getpid() || !GateMarksWanted() || !GateReady(stage)) return -1;
  freeride::GateMarkWatcher* watcher = Watcher(stage);
  if (!watcher) return -1;
  // The gate is ready (checked above): numbered and written directly, with
  // its record in place before the write can land.
  const uint32_t bubble = OpenNextGateBubble(stage);
  watcher->Record(bubble, slot, predicted_ns, free_memory_bytes);
  const uint32_t value = freeride::GateOpenValue(bubble);
  if (EnqueueGateValue(stage, compute_stream, value) != 0) {
    watcher->Forget(bubble);  // its number is used up: the watcher skips it
    return -1;
  }
  watcher->Wrote(&stage->gate_page.layout()->word, value, bubble);
  return 0;
}

int freeride_bubble_end_gated(freeride_stage* stage, void* compute_stream) {
  if (!stage || !stage->mark_watcher || stage->owner_pid != getpid()) return -1;
  uint32_t value = 0;
  if (WriteGate(stage, compute_stream, false, &value) != 0) {
    stage->mark_watcher->ForceEnd(stage->gate_bubble);
    return -1;
  }
  stage->mark_watcher->Wrote(&stage->gate_page.layout()->word, value, stage->gate_bubble);
  return 0;
}

void freeride_bubble_end_gated_on_host(freeride_stage* stage) {
  if (stage && stage->mark_watcher && stage->owner_pid == getpid())
    stage->mark_watcher->ForceEnd(stage->gate_bubble);
}

void freeride_stage_set_gate_writes(freeride_stage* stage, int mode) {
  if (stage && (mode == FREERIDE_GATE_WRITE_AUTO || mode == FREERIDE_GATE_WRITE_STREAM ||
                mode == FREERIDE_GATE_WRITE_MEMSET))
    stage->gate_write_mode = mode;
}

void freeride_stage_gate_writes(const freeride_stage* stage, uint64_t* on_stream, uint64_t* from_host) {
  if (on_stream) *on_stream = stage ? stage->gate_writes_on_stream : 0;
  if (from_host) *from_host = stage ? stage->gate_writes_from_host : 0;
}

int freeride_gate_open_on_stream(freeride_stage* stage, void* compute_stream) {
  return WriteGate(stage, compute_stream, true);
}

int freeride_gate_close_on_stream(freeride_stage* stage, void* compute_stream) {
  return WriteGate(stage, compute_stream, false);
}

}  // extern "C"
