// Sizes a side task's next chunk of work to a time budget (PipeFill's
// "work plan"): from measured chunk times, learn the cost of one work item
// and size the next chunk to fill --step-ms.  Pure; time is passed in.
#pragma once
#include <chrono>
#include <cstdint>

namespace freeride::tasks {

class StepSizer {
 public:
  // target_ns: the wanted step time.  Chunks stay within [min_items,
  // max_items]; the first chunk is `initial_items`.
  StepSizer(int64_t target_ns, int64_t initial_items, int64_t min_items, int64_t max_items);

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
  double ns_per_item_ = 0;
};

}  // namespace freeride::tasks
