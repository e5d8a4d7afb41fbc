// freeride-sgd: matrix factorisation by SGD as a FreeRide iterative side
// task.  A step is a slice of the ratings, sized to --step-ms; the RMSE is
// reported after every epoch.
//
//   freeride-sgd --generate-users 100000 --generate-items 20000 --generate-ratings 10000000
//   freeride-sgd --ratings ml-25m.csv --epochs 20 --device cuda
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "common/gpu.h"
#include "common/bubble_windows.h"
#include "common/step_sizer.h"
#include "common/task_options.h"
#include "freeride/task.h"
#include "sgd/sgd.h"

namespace freeride::tasks {
namespace {

struct Options {
  std::string ratings;
  int32_t users = 0, items = 0;
  int64_t count = 0;
  uint64_t data_seed = 3;
  CommonTaskOptions common;
  int epochs = 10;
  SgdParams params;
};

class SgdTask : public IterativeTask {
 public:
  explicit SgdTask(Options o) : o_(std::move(o)) {}
  std::string unit() const override { return "ratings"; }
  uint64_t peak_memory_bytes() const override { return PeakGpuBytes(); }

  void Init() override {
    Device device = ChooseDevice(o_.common.device);
    uint64_t limit = MemoryLimitBytes();
    if (o_.ratings.empty()) {
      CheckMemoryFits(SgdBytes(o_.users, o_.items, o_.count, o_.params.rank), limit,
                      "the generated ratings and factors");
      set_ = GenerateRatings(o_.users, o_.items, o_.count, o_.params.rank, o_.data_seed);
    } else {
      set_ = LoadRatings(o_.ratings, o_.params.rank, limit);
    }
    engine_ = MakeSgdEngine(device, set_, o_.params);
    total_ = static_cast<int64_t>(set_.ratings.size());
    sizer_ = StepSizer(static_cast<int64_t>(o_.common.step_ms * 1e6), 4096, 256, total_);
    on_gpu_ = device == Device::kCuda;
    std::fprintf(stderr, "sgd: %d users, %d items, %lld ratings, rank %d on %s; RMSE %.4f\n",
                 set_.users, set_.items, static_cast<long long>(total_), o_.params.rank,
                 DeviceName(device), engine_->Rmse());
  }

  StepResult Step() override {
    if (steps_++ == 0) {
      sizer_.set_slow_chunks(SlowChunksForThisStep(on_gpu_));
      bubble_steps_.Start(sizer_.slow_chunks(), o_.common.fixed_steps);
    }
    sizer_.set_target_ns(bubble_steps_.TargetNs());
    // The RMSE pass over all ratings is a step of its own, so that it does
    // not overrun the budget of an update step.
    if (epoch_done_) {
      epoch_done_ = false;
      ++epoch_;
      last_rmse_ = engine_->Rmse();
      std::fprintf(stderr, "sgd: epoch %d, RMSE %.4f\n", epoch_, last_rmse_);
      return {0, epoch_ >= o_.epochs};
    }
    int64_t end = std::min(total_, cursor_ + sizer_.next_items());
    sizer_.RunChunk(end - cursor_, [&] { engine_->Update(cursor_, end); });
    double units = static_cast<double>(end - cursor_);
    bubble_steps_.Record(units);
    cursor_ = end;
    if (cursor_ < total_) return {units, false};
    cursor_ = 0;
    epoch_done_ = true;
    return {units, false};
  }

  void Finish() override {
    std::printf("{\"task\":\"sgd\",\"epochs\":%d,\"rmse\":%.6f}\n", epoch_, last_rmse_);
  }

  bool Save(const std::string& path) override {
    std::vector<float> u, i;
    engine_->GetFactors(&u, &i);
    std::ofstream out(path, std::ios::binary);
    int64_t header[5] = {set_.users, set_.items, total_, epoch_ + (epoch_done_ ? 1 : 0), cursor_};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(u.data()), u.size() * sizeof(float));
    out.write(reinterpret_cast<const char*>(i.data()), i.size() * sizeof(float));
    return static_cast<bool>(out);
  }

  bool Restore(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    int64_t header[5];
    if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return false;
    if (header[0] != set_.users || header[1] != set_.items || header[2] != total_) {
      std::fprintf(stderr, "sgd: checkpoint is for other ratings; starting over\n");
      return false;
    }
    std::vector<float> u(static_cast<size_t>(set_.users) * o_.params.rank),
        i(static_cast<size_t>(set_.items) * o_.params.rank);
    if (!in.read(reinterpret_cast<char*>(u.data()), u.size() * sizeof(float)) ||
        !in.read(reinterpret_cast<char*>(i.data()), i.size() * sizeof(float)))
      return false;
    engine_->SetFactors(u, i);
    epoch_ = static_cast<int>(header[3]);
    cursor_ = header[4];
    return true;
  }

 private:
  Options o_;
  RatingSet set_;
  std::unique_ptr<SgdEngine> engine_;
  StepSizer sizer_{1, 1, 1, 1};
  // The step time aimed at: --step-ms, or behind a gate bubble-sized.
  BubbleSizedSteps bubble_steps_{static_cast<int64_t>(o_.common.step_ms * 1e6)};
  bool on_gpu_ = false;
  uint64_t steps_ = 0;
  int64_t total_ = 0, cursor_ = 0;
  int epoch_ = 0;
  bool epoch_done_ = false;  // all ratings of the epoch applied; RMSE next
  double last_rmse_ = 0;
};

}  // namespace
}  // namespace freeride::tasks

int main(int argc, char** argv) {
  freeride::tasks::Options o;
  CLI::App app{"SGD matrix factorisation as a FreeRide side task"};
  auto* file = app.add_option("--ratings", o.ratings, "Rating file: 'user item rating' per line");
  auto* gen = app.add_option("--generate-ratings", o.count, "Generate this many ratings instead");
  file->excludes(gen);
  app.add_option("--generate-users", o.users, "Users of generated ratings")->default_val(10000);
  app.add_option("--generate-items", o.items, "Items of generated ratings")->default_val(2000);
  app.add_option("--data-seed", o.data_seed, "Seed of generated ratings")->capture_default_str();
  app.add_option("--rank", o.params.rank, "Latent factors (1..64)")->capture_default_str();
  app.add_option("--learning-rate", o.params.learning_rate)->capture_default_str();
  app.add_option("--regularisation", o.params.regularisation)->capture_default_str();
  app.add_option("--epochs", o.epochs, "Passes over the ratings")->capture_default_str();
  return freeride::tasks::RunTaskMain<freeride::tasks::SgdTask>(
      app, o, argc, argv, [](const auto& o) { return !o.ratings.empty() || o.count != 0; },
      "freeride-sgd: give --ratings FILE or --generate-ratings N");
}
