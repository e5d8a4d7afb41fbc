// The GPU gate, timed on the GPU: how long after the stage's stream opens
// the gate does a side task's next kernel start, and does any side kernel
// start while the gate is closed?
//
//   gate_latency stage ITERATIONS BUSY_US BUBBLE_US OUT [gated|stream]
//                                                         (a stand-in stage: libfreeride's marks)
//   gate_latency side SECONDS OUT                         (an unmodified CUDA program)
//   gate_latency ops SECONDS OUT                          (one of fills, prefetches and graph uploads)
//
// The stage marks iterations of 8 bubbles (slots 0 to 7) and stamps
// %globaltimer just before it opens the gate and just
// after it closes it.  Its marks are "gated" (freeride_bubble_begin_gated:
// the gate's stream writes alone, read by libfreeride's marks thread, as
// freeride.torch marks; the default) or "stream" (the gate's writes beside
// host functions on the stream, the fallback where the marks thread is off); the side program, run under the daemon (so the
// interposer gates it), stamps the start of every kernel it launches (each
// then works for 20 us).
// bench/gate_gpu.py pairs the two files.  Build on a GPU node:
//   nvcc -O2 -arch=sm_90 -Iinclude -o gate_latency bench/gate_latency.cu -L$LIB -lfreeride
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "freeride/freeride.h"

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__global__ void Stamp(unsigned long long* out) { *out = GlobalTimer(); }
// A side program's piece: stamps its own start, then works for `ns`, so
// that the first piece after an open is timed whichever it is.
__global__ void StampThenSpin(unsigned long long* out, unsigned long long ns) {
  unsigned long long start = GlobalTimer();
  *out = start;
  while (GlobalTimer() < start + ns) {
  }
}
__global__ void SpinFor(unsigned long long ns) {
  unsigned long long end = GlobalTimer() + ns;
  while (GlobalTimer() < end) {
  }
}

constexpr int kSlots = 8;

int Stage(int iterations, int busy_us, int bubble_us, const char* out, bool gated_marks) {
  freeride_stage* stage = freeride_stage_open(0, nullptr);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long* stamps;
  CHECK(cudaMalloc(&stamps, sizeof(unsigned long long) * 2 * iterations));
  int gated = 0;
  for (int i = 0; i < iterations; ++i) {
    SpinFor<<<1, 1, 0, s>>>(busy_us * 1000ull);
    Stamp<<<1, 1, 0, s>>>(&stamps[2 * i]);
    // Iterations of kSlots bubbles: the daemon forecasts each so that a
    // piece can be queued ahead of it, and an iteration's first is watched.
    if (gated_marks) {
      gated += freeride_bubble_begin_gated(stage, s, i % kSlots, 0, UINT64_MAX) == 0;
    } else {
      gated += freeride_gate_open_on_stream(stage, s) == 0;
      freeride_bubble_begin_on_stream(stage, s, i % kSlots, 0, UINT64_MAX);
    }
    SpinFor<<<1, 1, 0, s>>>(bubble_us * 1000ull);
    if (gated_marks) {
      freeride_bubble_end_gated(stage, s);
    } else {
      freeride_gate_close_on_stream(stage, s);
      freeride_bubble_end_on_stream(stage, s);
    }
    Stamp<<<1, 1, 0, s>>>(&stamps[2 * i + 1]);
    if (i % 16 == 15) CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned long long> host(2 * iterations);
  CHECK(cudaMemcpy(host.data(), stamps, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost));
  freeride_stage_close(stage);
  FILE* f = std::fopen(out, "w");
  std::fprintf(f, "# stage gated %d of %d\n", gated, iterations);
  for (int i = 0; i < iterations; ++i) std::fprintf(f, "B %llu %llu\n", host[2 * i], host[2 * i + 1]);
  std::fclose(f);
  std::printf("stage: %d bubbles, %d gated\n", iterations, gated);
  return gated == iterations ? 0 : 3;
}

int Side(double seconds, const char* out) {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int capacity = 1 << 20;
  unsigned long long* stamps;
  CHECK(cudaMalloc(&stamps, sizeof(unsigned long long) * capacity));
  auto begin = std::chrono::steady_clock::now();
  int n = 0;
  while (n < capacity &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < seconds) {
    StampThenSpin<<<1, 1, 0, s>>>(&stamps[n++], 20000);  // 20 us of work per piece
    if (n % 64 == 0) CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned long long> host(n);
  CHECK(cudaMemcpy(host.data(), stamps, n * sizeof(host[0]), cudaMemcpyDeviceToHost));
  FILE* f = std::fopen(out, "w");
  for (int i = 0; i < n; ++i) std::fprintf(f, "S %llu\n", host[i]);
  std::fclose(f);
  std::printf("side: %d kernels\n", n);
  return 0;
}

// The side program's other work: the entry points that are not launches.
// Each round fills a pitched buffer with cudaMemset2D (synchronous), moves a
// managed buffer to the GPU with cudaMemPrefetchAsync, checks both on the
// GPU from a kernel that stamps its start, then uploads and launches a graph
// whose kernel stamps its start.  Every value is checked, so a wrapper that
// handed the driver its arguments shifted is seen (exit 4), not only one that
// let work through the shut gate (a stamp outside the bubbles).
__global__ void CheckThenStamp(const unsigned char* pitched, size_t pitch, int width, int height,
                               unsigned char fill, const int* managed, int count, int expected,
                               unsigned long long* stamp, unsigned long long* wrong) {
  unsigned long long start = GlobalTimer();
  *stamp = start;
  unsigned long long bad = 0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) bad += pitched[y * pitch + x] != fill;
  for (int i = 0; i < count; ++i) bad += managed[i] != expected + i;
  *wrong += bad;
}

int Ops(double seconds, const char* out) {
  // A blocking stream: the synchronous fills run on the legacy stream, and
  // the checking kernel must come after them.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  int device = 0;
  CHECK(cudaGetDevice(&device));
  const int capacity = 1 << 16, width = 256, height = 64, count = 4096;
  unsigned long long *stamps, *wrong;
  CHECK(cudaMalloc(&stamps, sizeof(unsigned long long) * capacity));
  CHECK(cudaMalloc(&wrong, sizeof(unsigned long long)));
  CHECK(cudaMemset(wrong, 0, sizeof(unsigned long long)));
  CHECK(cudaDeviceSynchronize());
  unsigned char* pitched;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, width, height));
  int* managed;
  CHECK(cudaMallocManaged(&managed, count * sizeof(int)));
  // The graph, captured once (capture queues no work): a stamped kernel.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  int graph_slot = capacity - 1;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  StampThenSpin<<<1, 1, 0, s>>>(&stamps[graph_slot], 20000);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaMemLocation on_gpu{};  // CUDA 13's cudaMemPrefetchAsync takes a location (12.x's took a device)
  on_gpu.type = cudaMemLocationTypeDevice;
  on_gpu.id = device;
  auto begin = std::chrono::steady_clock::now();
  int n = 0, rounds = 0;
  std::vector<unsigned long long> graph_starts;
  unsigned long long graph_start = 0;
  while (n + 1 < graph_slot &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < seconds) {
    const unsigned char fill = static_cast<unsigned char>(rounds % 251 + 1);
    CHECK(cudaStreamSynchronize(s));  // the host writes the managed buffer: nothing of the GPU's in flight
    for (int i = 0; i < count; ++i) managed[i] = rounds + i;
    CHECK(cudaMemset2D(pitched, pitch, fill, width, height));
    CHECK(cudaMemPrefetchAsync(managed, count * sizeof(int), on_gpu, 0, s));
    CheckThenStamp<<<1, 1, 0, s>>>(pitched, pitch, width, height, fill, managed, count, rounds, &stamps[n++], wrong);
    CHECK(cudaGetLastError());
    CHECK(cudaGraphUpload(exec, s));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaMemcpyAsync(&graph_start, &stamps[graph_slot], sizeof graph_start, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    graph_starts.push_back(graph_start);
    ++rounds;
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned long long> host(n);
  unsigned long long wrong_host = 0;
  CHECK(cudaMemcpy(host.data(), stamps, n * sizeof(host[0]), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&wrong_host, wrong, sizeof wrong_host, cudaMemcpyDeviceToHost));
  FILE* f = std::fopen(out, "w");
  for (int i = 0; i < n; ++i) std::fprintf(f, "S %llu\n", host[i]);
  for (unsigned long long t : graph_starts) std::fprintf(f, "S %llu\n", t);
  std::fprintf(f, "# rounds %d wrong %llu\n", rounds, wrong_host);
  std::fclose(f);
  std::printf("ops: %d rounds, %llu wrong values\n", rounds, wrong_host);
  return wrong_host == 0 ? 0 : 4;
}

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  if (role == "stage" && (argc == 6 || argc == 7)) {
    const std::string marks = argc == 7 ? argv[6] : "gated";
    if (marks == "gated" || marks == "stream")
      return Stage(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argv[5], marks == "gated");
  }
  if (role == "side" && argc == 4) return Side(std::atof(argv[2]), argv[3]);
  if (role == "ops" && argc == 4) return Ops(std::atof(argv[2]), argv[3]);
  std::fprintf(stderr, "usage: gate_latency stage ITERATIONS BUSY_US BUBBLE_US OUT [gated|stream] | side SECONDS OUT | "
               "ops SECONDS OUT\n");
  return 2;
}
