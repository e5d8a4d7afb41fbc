// What the gate's own logic costs a side program's launching thread, per
// piece of GPU work (LaunchGate::BeforeWork and AfterWork, as the
// interposer's wrapper calls them around an asynchronous launch), on a
// driver table whose calls do nothing: the gate's share of a launch apart
// from the driver's.  Each row also counts the driver calls the gate made
// per piece (`driver_calls`), which on a real GPU cost about a microsecond
// or more each (bench/interposer_cost_gpu.py times them there).
//
//   build/bench/launch_gate_bench                      # all rows
//   build/bench/launch_gate_bench --benchmark_filter=Far
//
// Rows: a piece far inside an open bubble (most go without their GPU wait,
// one fence for eight), and every piece waited, fenced and passed
// (FREERIDE_GATE_STRICT=1, the dearest path); each from one thread and from
// two launching at once on their own streams.  The far-inside row is a lower
// bound: this driver reaches every event at once, so each stream's queue
// drains and its run of unwaited pieces starts afresh; on a GPU that lags
// the host at least one piece in nine gets its wait (and its pass).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "gate/driver_types.h"
#include "gate/gate_page.h"
#include "gate/launch_gate.h"

namespace freeride::gate {
namespace {

// The calls the calling thread made (each benchmark thread counts its own).
thread_local uint64_t driver_calls = 0;

// A driver table whose calls succeed at once: events are reached as soon as
// they are recorded, and a timed piece took 20 us.
DriverApi NullDriver() {
  DriverApi api;
  api.stream_wait_value32 = [](CuStream, CuDevicePtr, uint32_t, unsigned) {
    ++driver_calls;
    return kCudaSuccess;
  };
  api.stream_is_capturing = [](CuStream, int* status) {
    ++driver_calls;
    *status = 0;
    return kCudaSuccess;
  };
  api.mem_host_register = [](void*, size_t, unsigned) { return kCudaSuccess; };
  api.mem_host_get_device_pointer = [](CuDevicePtr* device, void* host, unsigned) {
    *device = reinterpret_cast<CuDevicePtr>(host);
    return kCudaSuccess;
  };
  api.event_create = [](CuEvent* event, unsigned) {
    ++driver_calls;
    static std::atomic<intptr_t> next{1};
    *event = reinterpret_cast<CuEvent>(next.fetch_add(1));
    return kCudaSuccess;
  };
  api.event_record = [](CuEvent, CuStream) {
    ++driver_calls;
    return kCudaSuccess;
  };
  api.event_query = [](CuEvent) {
    ++driver_calls;
    return kCudaSuccess;
  };
  api.event_elapsed_time = [](float* ms, CuEvent, CuEvent) {
    ++driver_calls;
    *ms = 0.02f;
    return kCudaSuccess;
  };
  api.event_destroy = [](CuEvent) {
    ++driver_calls;
    return kCudaSuccess;
  };
  api.thread_exchange_capture_mode = [](int*) {
    ++driver_calls;
    return kCudaSuccess;
  };
  return api;
}

alignas(4096) char page[kGatePageBytes];
GateTaskSlot slot;
std::unique_ptr<LaunchGate> gate;

// One piece, as the interposer's wrapper queues an asynchronous launch.
void Piece(CuStream stream) {
  WorkSample sample;
  if (gate->BeforeWork(stream, false, &sample) == kCudaSuccess) gate->AfterWork(sample);
}

// Bubble 1 open with no deadline (far inside it), and the gate armed and its
// pieces' length learned, as in a program past its first pieces.
void OpenGate(bool strict) {
  auto& layout = *reinterpret_cast<GatePageLayout*>(page);
  layout.word.store(GateOpenValue(1));
  layout.admit_until_ns.store(INT64_MAX);
  layout.admit_bubble.store(1);
  slot.ClearFields();
  gate = std::make_unique<LaunchGate>(NullDriver(), page, "", &slot, RealHostClock(), strict);
  for (uint64_t i = 0; i < 4 * LaunchGate::kSampleEvery; ++i) Piece(reinterpret_cast<CuStream>(0x1000));
  if (gate->work_p95_ns() <= 0) std::abort();  // the far-inside path needs a learned length
}
void OpenGateRelaxed(const benchmark::State&) { OpenGate(false); }
void OpenGateStrict(const benchmark::State&) { OpenGate(true); }
void CloseGate(const benchmark::State&) { gate.reset(); }

void BM_Piece(benchmark::State& state) {
  const CuStream stream = reinterpret_cast<CuStream>(0x1000 + 0x100 * state.thread_index());
  driver_calls = 0;
  for (auto _ : state) Piece(stream);
  // Summed over the threads, over all their iterations: per piece.
  state.counters["driver_calls"] =
      benchmark::Counter(static_cast<double>(driver_calls), benchmark::Counter::kAvgIterations);
  if (state.thread_index() == 0) {
    const GateCounters c = gate->counters();
    state.counters["waited_share"] =
        static_cast<double>(c.waits) / static_cast<double>(std::max<uint64_t>(1, c.waits + c.unwaited));
  }
}

BENCHMARK(BM_Piece)->Name("FarInsideOpenBubble")->Setup(OpenGateRelaxed)->Teardown(CloseGate)->Threads(1)->Threads(2);
BENCHMARK(BM_Piece)->Name("EveryPieceWaitedStrict")->Setup(OpenGateStrict)->Teardown(CloseGate)->Threads(1)->Threads(2);

}  // namespace
}  // namespace freeride::gate

BENCHMARK_MAIN();
