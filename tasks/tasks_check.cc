// freeride-tasks-check: runs each built-in task's CPU reference and CUDA
// engine on the same input and compares them (PageRank ranks to L1 <= 1e-4,
// SGD RMSE within 1%, resized and watermarked images within 1 grey level).  Exit 0 when all agree, 1 when one does not, 77 when
// there is no usable GPU.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu.h"
#include "image/image.h"
#include "pagerank/pagerank.h"
#include "sgd/sgd.h"

using namespace freeride::tasks;

namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool CheckPageRank(int scale) {
  Graph g = GenerateRmat(scale, 16, 1);
  auto cpu = MakeCpuPageRank(g), gpu = MakeCudaPageRank(g);
  const int iterations = 30;
  double t_cpu = 0, t_gpu = 0;
  for (int it = 0; it < iterations; ++it) {
    for (auto* e : {cpu.get(), gpu.get()}) {
      auto t0 = std::chrono::steady_clock::now();
      e->BeginIteration();
      for (int64_t v = 0; v < g.vertices; v += 4096) e->ProcessVertices(v, std::min(g.vertices, v + 4096));
      e->EndIteration();
      (e == cpu.get() ? t_cpu : t_gpu) += Seconds(t0);
    }
  }
  std::vector<double> a = cpu->Ranks(), b = gpu->Ranks();
  double l1 = 0;
  for (size_t v = 0; v < a.size(); ++v) l1 += std::fabs(a[v] - b[v]);
  bool ok = l1 <= 1e-4;
  std::printf("| pagerank | R-MAT scale %d: %lld vertices, %lld edges, %d iterations | L1(cpu, cuda) = %.3g | %s | cpu %.2f s, cuda %.2f s |\n",
              scale, static_cast<long long>(g.vertices), static_cast<long long>(g.edges()),
              iterations, l1, ok ? "pass (<= 1e-4)" : "FAIL", t_cpu, t_gpu);
  return ok;
}

bool CheckSgd(int64_t ratings) {
  RatingSet set = GenerateRatings(50000, 10000, ratings, 16, 3);
  SgdParams p;
  auto cpu = MakeSgdEngine(Device::kCpu, set, p), gpu = MakeSgdEngine(Device::kCuda, set, p);
  const int epochs = 10;
  const int64_t n = static_cast<int64_t>(set.ratings.size());
  double t_cpu = 0, t_gpu = 0;
  for (int e = 0; e < epochs; ++e) {
    for (auto* engine : {cpu.get(), gpu.get()}) {
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n; i += 65536) engine->Update(i, std::min(n, i + 65536));
      (engine == cpu.get() ? t_cpu : t_gpu) += Seconds(t0);
    }
  }
  double a = cpu->Rmse(), b = gpu->Rmse();
  bool ok = std::fabs(a - b) <= 0.01 * a;
  std::printf("| sgd | %lld ratings, 50000 users x 10000 items, rank 16, %d epochs | RMSE cpu %.4f, cuda %.4f (%.2f%%) | %s | cpu %.2f s, cuda %.2f s |\n",
              static_cast<long long>(n), epochs, a, b, 100 * std::fabs(a - b) / a,
              ok ? "pass (within 1%)" : "FAIL", t_cpu, t_gpu);
  return ok;
}

// Each source size is resized down, up and to a different aspect ratio.
bool CheckImage(int src_w, int src_h) {
  Image watermark = DefaultWatermark(160, 48);
  auto cpu = MakeCpuImageTransformer(watermark), gpu = MakeCudaImageTransformer(watermark);
  int worst = 0;
  int64_t pixels = 0;
  double t_cpu = 0, t_gpu = 0;
  const int sizes[][2] = {{src_w / 3, src_h / 3}, {src_w * 2, src_h * 2}, {src_w / 2, src_h}};
  for (int seed = 0; seed < 2; ++seed) {
    Image source = SyntheticImage(src_w, src_h, seed);
    for (const auto& size : sizes) {
      TransformGeometry g = PlaceWatermark(src_w, src_h, size[0], size[1], watermark, 0.6f);
      std::vector<uint8_t> a(static_cast<size_t>(size[0]) * size[1] * 3), b(a.size());
      for (auto [engine, out, t] : {std::tuple{cpu.get(), &a, &t_cpu}, {gpu.get(), &b, &t_gpu}}) {
        auto t0 = std::chrono::steady_clock::now();
        engine->Begin(g, source.pixels.data());
        engine->SourceRowsReady(0, src_h);
        for (int y = 0; y < size[1]; y += 64)
          engine->TransformRows(y, std::min(size[1], y + 64), out->data() + static_cast<size_t>(y) * size[0] * 3);
        *t += Seconds(t0);
      }
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      pixels += static_cast<int64_t>(size[0]) * size[1];
    }
  }
  bool ok = worst <= 1;
  std::printf("| image | %dx%d sources, resized to 1/3, 2x and half width, watermark at 0.6, %lld output pixels | max abs(cpu - cuda) = %d grey levels | %s | cpu %.2f s, cuda %.2f s |\n",
              src_w, src_h, static_cast<long long>(pixels), worst, ok ? "pass (<= 1)" : "FAIL", t_cpu, t_gpu);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!CudaUsable(&why)) {
    std::printf("freeride-tasks-check: skipped: %s\n", why.c_str());
    return 77;
  }
  bool small = argc > 1 && std::string(argv[1]) == "--small";
  std::printf("| task | input | comparison | verdict | time |\n|---|---|---|---|---|\n");
  bool ok = true;
  try {
    ok &= CheckPageRank(small ? 14 : 20);
    ok &= CheckSgd(small ? 200000 : 5000000);
    ok &= small ? CheckImage(320, 240) : CheckImage(1920, 1080);
  } catch (const std::exception& e) {
    std::printf("freeride-tasks-check: error: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
