// Sizes a side task's next chunk of work to a time budget (PipeFill's
// "work plan"): from measured chunk times, learn the cost of one work item
// and size the next chunk to fill --step-ms.  Pure; time is passed in.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

namespace freeride::tasks {

// What a chunk that took longer than the estimate says of the work's cost.
// - kBelieved: the work got dearer (the device is contended), or the task
//   was stopped inside it at a bubble's end (host-side dispatch): the next
//   chunk is sized to it at once, so that it does not overrun again.
// - kOutvoted: the task's GPU work runs behind the lane's GPU gate, so a
//   chunk's time also holds the gate's wait for a bubble, which says nothing
//   of the work's cost (one hold is tens of milliseconds: believed, it
//   shrinks the next chunk to the smallest).  The cost is the lower median
//   of the last kRecent chunks', so a dearer cost is taken once it holds for
//   more than half of them (5 of 8; of 2, the cheaper one).
enum class SlowChunks { kBelieved, kOutvoted };

// kOutvoted for a task whose work is on a GPU (`on_gpu`), that steps on its
// own (`runs_alone`: --standalone, no daemon, or one it could not attach
// to; inside Step(), freeride::StepBudgetNs() is INT64_MAX then), and whose
// GPU work the lane's gate holds (the daemon gave it a gate page,
// FREERIDE_GATE_PAGE: a program submitted as any other, e.g. by
// bench/gate_gpu.py); else kBelieved.  A task granted its steps keeps
// kBelieved even behind a gate: there a held chunk overran its grant.
SlowChunks SlowChunksFromEnvironment(bool on_gpu, bool runs_alone);

// The same, asked from inside Step() (whether the task runs alone is known
// only there): kOutvoted where StepBudgetNs() says the task steps alone.
SlowChunks SlowChunksForThisStep(bool on_gpu);

class StepSizer {
 public:
  // Chunks whose cost per item the kOutvoted estimate is the median of.
  static constexpr int kRecent = 8;

  // target_ns: the wanted step time.  Chunks stay within [min_items,
  // max_items]; the first chunk is `initial_items`.
  StepSizer(int64_t target_ns, int64_t initial_items, int64_t min_items, int64_t max_items,
            SlowChunks slow = SlowChunks::kBelieved);

  // Takes the rule for slow chunks from now on (what was learned stays).
  void set_slow_chunks(SlowChunks slow) { slow_ = slow; }
  SlowChunks slow_chunks() const { return slow_; }
  // Aims at `target_ns` from the next Record on (what was learned stays).
  void set_target_ns(int64_t target_ns) { target_ns_ = std::max<int64_t>(1, target_ns); }
  int64_t target_ns() const { return target_ns_; }

  int64_t next_items() const { return next_; }

  // Records that `items` took `elapsed_ns`, and sizes the next chunk.
  void Record(int64_t items, int64_t elapsed_ns);

  // Runs work() on a chunk of `items` and records how long it took.
  template <typename Work>
  void RunChunk(int64_t items, Work&& work) {
    auto start = std::chrono::steady_clock::now();
    work();
    Record(items, std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count());
  }

  // Learned nanoseconds per item; 0 before the first record.
  double ns_per_item() const { return ns_per_item_; }

 private:
  int64_t target_ns_, min_, max_, next_;
  SlowChunks slow_;
  double ns_per_item_ = 0;
  std::array<double, kRecent> recent_{};  // kOutvoted: the last chunks' cost per item
  int kept_ = 0;                          // ... how many of recent_ are filled
  int next_slot_ = 0;                     // ... and where the next one goes
};

}  // namespace freeride::tasks
