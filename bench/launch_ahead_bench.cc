// What launch ahead's hand-off costs (gate/launch_ahead.h): a program's
// launch is copied into the queue on its own thread and made by the
// submitter, so each piece crosses threads, and a synchronising call waits
// at a barrier for the submitter to catch up.  The pieces here do nothing,
// so the rows are the hand-off alone, side by side with the submitter and
// the barrier sleeping at once (spin_ns 0) and looking for 50 us first (the
// default, LaunchAhead::kSpinFor).
//
//   build/bench/launch_ahead_bench
//
// Rows:
// - DeferThenBarrier: one piece, then a barrier (a program that reads the
//   GPU back after every launch: the round trip through the submitter);
// - DeferRunThenBarrier/64: 64 pieces, then a barrier (a burst of launches
//   between reads); time per piece.
// `wakes` is the share of pieces whose Defer had to wake a sleeping submitter.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "gate/launch_ahead.h"

namespace freeride::gate {
namespace {

void Report(benchmark::State& state, const LaunchAhead& ahead, int64_t pieces) {
  const LaunchAheadCounters c = ahead.counters();
  state.counters["wakes"] = pieces > 0 ? static_cast<double>(c.wakes) / static_cast<double>(pieces) : 0;
  state.SetItemsProcessed(pieces);
}

void BM_DeferThenBarrier(benchmark::State& state) {
  LaunchAhead ahead(1024, std::chrono::nanoseconds(state.range(0)));
  int64_t pieces = 0;
  for (auto _ : state) {
    ahead.Defer([] { return kCudaSuccess; });
    ahead.Barrier();
    ++pieces;
  }
  Report(state, ahead, pieces);
}
BENCHMARK(BM_DeferThenBarrier)->Name("DeferThenBarrier")->ArgName("spin_ns")->Arg(0)->Arg(50'000)->UseRealTime();

void BM_DeferRunThenBarrier(benchmark::State& state) {
  LaunchAhead ahead(1024, std::chrono::nanoseconds(state.range(1)));
  const int64_t run = state.range(0);
  int64_t pieces = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < run; ++i) ahead.Defer([] { return kCudaSuccess; });
    ahead.Barrier();
    pieces += run;
  }
  Report(state, ahead, pieces);
}
BENCHMARK(BM_DeferRunThenBarrier)
    ->Name("DeferRunThenBarrier")
    ->ArgNames({"run", "spin_ns"})
    ->Args({64, 0})
    ->Args({64, 50'000})
    ->UseRealTime();

}  // namespace
}  // namespace freeride::gate

BENCHMARK_MAIN();
