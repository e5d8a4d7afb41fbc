// The GPU gate of one lane: a page of shared memory whose first word a side
// task's GPU streams wait on before each piece of work, and that the
// training stage's own CUDA stream opens and closes.
//
// Word encoding: (bubble << 1) | open.  The stage's stream writes
// OpenValue(n) where its bubble n begins and ClosedValue(n) where it ends
// (cuStreamWriteValue32, so the trainer's path gains no host callback and no
// wait).  Side streams wait with CU_STREAM_WAIT_VALUE_AND and mask 1, so
// they pass exactly while some bubble is open.  The daemon may close bubble
// n, on the CPU, with a compare-and-swap from OpenValue(n) to
// ClosedValue(n): it closes that bubble only, never a later one that the
// stage has opened meanwhile.  It does so only for a stage that marks from
// the host alone, and for a silent or dead stage: a bubble's early end is
// published instead as its admission deadline (admit_bubble,
// admit_until_ns), which each task's interposer applies on the host before
// it queues a piece of work (gate/piece_admission.h), so that no wait is
// left pending on the GPU through the busy time.
//
// Writers: the stage's GPU stream (word), the daemon (word by CAS, the
// admission deadline and the counters below), the interposer in each task
// (its registration count and its slot).
// The page is registered with cuMemHostRegister in the stage and in each
// task, so the GPU reads and writes it over the bus; the daemon needs no
// CUDA at all.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "channel/shared_mapping.h"

namespace freeride {

constexpr uint64_t kGatePageMagic = 0x4652474154453031ULL;  // "FRGATE01"
constexpr uint32_t kGatePageVersion = 9;
// Gated processes that publish their work's length at once; more share none.
constexpr int kGateTaskSlots = 32;
constexpr size_t kGatePageBytes = 4096;

// The value the stage's stream writes at the begin (end) of its bubble n.
constexpr uint32_t GateOpenValue(uint32_t bubble) { return (bubble << 1) | 1u; }
constexpr uint32_t GateClosedValue(uint32_t bubble) { return bubble << 1; }
constexpr bool GateIsOpen(uint32_t word) { return (word & 1u) != 0; }

// What one gated process publishes of its GPU work: the 95th percentile of
// the lengths of its sampled pieces (kernels, graphs, copies), which the
// daemon shows in the lane's margin (its interposer holds each piece to the
// bubble's deadline by the piece's own predicted length).
struct GateTaskSlot {
  std::atomic<int64_t> pid;  // 0: free; claimed with a compare-and-swap
  std::atomic<int64_t> work_p95_ns;
  std::atomic<uint64_t> samples;
  // Its work found unfinished after its bubble had closed (gate/late_work.h):
  // in all, and the stretches of it.  Cumulative for this process.
  std::atomic<int64_t> late_ns;
  std::atomic<uint64_t> late_bubbles;
  // Written by the daemon: 1 while the process's task is demoted by its
  // overrun budget (its late work counts as its overruns); its interposer
  // then counts each piece at twice its predicted length, and none goes
  // without its GPU wait.
  std::atomic<uint32_t> demoted;
  uint32_t reserved;
  // Busy time its work spent pending on a GPU wait after its bubble had
  // closed (not started, so not late work).  Cumulative for this process.
  std::atomic<int64_t> pending_ns;
  // Time its threads were held on the host while the gate read open, summed
  // over threads, by why (gate/piece_admission.h's verdicts): the bubble's
  // deadline not yet published or being rewritten (the forecast, if any,
  // did not admit the piece); queued work still draining; the piece
  // predicted not to end by the deadline (the early close).  Where an open
  // gate's time goes unused.  Cumulative; added at each poll of a held thread.
  std::atomic<int64_t> held_unpublished_ns;
  std::atomic<int64_t> held_drain_ns;
  std::atomic<int64_t> held_fit_ns;

  // Zeroes all but `pid`: what a process that claims the slot starts from.
  void ClearFields() {
    work_p95_ns.store(0, std::memory_order_relaxed);
    samples.store(0, std::memory_order_relaxed);
    late_ns.store(0, std::memory_order_relaxed);
    late_bubbles.store(0, std::memory_order_relaxed);
    demoted.store(0, std::memory_order_relaxed);
    pending_ns.store(0, std::memory_order_relaxed);
    held_unpublished_ns.store(0, std::memory_order_relaxed);
    held_drain_ns.store(0, std::memory_order_relaxed);
    held_fit_ns.store(0, std::memory_order_relaxed);
  }
};

// What a gated process has published in its slot of the gate page, read at
// once (each field is cumulative for that process; see GateTaskSlot).
struct GateTaskReport {
  int64_t late_ns = 0;
  uint64_t late_bubbles = 0;
  int64_t pending_ns = 0;
  int64_t held_unpublished_ns = 0;
  int64_t held_drain_ns = 0;
  int64_t held_fit_ns = 0;
};
inline GateTaskReport ReadTaskReport(const GateTaskSlot& slot) {
  return {slot.late_ns.load(std::memory_order_relaxed), slot.late_bubbles.load(std::memory_order_relaxed),
          slot.pending_ns.load(std::memory_order_relaxed), slot.held_unpublished_ns.load(std::memory_order_relaxed),
          slot.held_drain_ns.load(std::memory_order_relaxed), slot.held_fit_ns.load(std::memory_order_relaxed)};
}

struct GatePageLayout {
  // First in the page: the word the GPU reads and writes.
  std::atomic<uint32_t> word;
  uint32_t reserved;
  uint64_t magic;
  uint32_t version;
  int32_t lane;
  // --- written by the daemon ---
  // Work queued in bubble admit_bubble must be predicted to end by
  // admit_until_ns (CLOCK_MONOTONIC).  Written at each begin mark, as a
  // sequence lock: the bubble becomes kAdmissionBeingWritten, then the
  // deadline, then the bubble (ReadAdmission reads it).
  std::atomic<uint32_t> admit_bubble;
  uint32_t reserved_admission;
  std::atomic<int64_t> admit_until_ns;
  // The next bubble, forecast at the end of the last one (policy/next_bubble.h),
  // so that a piece may be queued behind the shut gate just before that
  // bubble begins and start on the GPU when the stage's stream opens it:
  // from ahead_from_ns, for bubble ahead_bubble forecast to begin at
  // ahead_begin_ns, work that is predicted to end by ahead_until_ns when it
  // starts at that begin.  A sequence lock like the admission's
  // (ReadAheadAdmission).  Nothing is published for a bubble that admits no
  // work, or whose begin cannot be forecast.  ahead_flags: kAheadWatchOnly,
  // for a bubble nothing may be queued ahead of (an iteration's first): its
  // window is one for watching the shut gate closely, not for queueing.
  std::atomic<uint32_t> ahead_bubble;
  std::atomic<uint32_t> ahead_flags;
  std::atomic<int64_t> ahead_from_ns;
  std::atomic<int64_t> ahead_begin_ns;
  std::atomic<int64_t> ahead_until_ns;
  std::atomic<uint64_t> early_closes;  // bubbles whose admission ended before their end mark
  std::atomic<uint64_t> forced_closes; // gates closed for a silent or dead stage
  // --- written by each interposer, once, as it registers the page ---
  std::atomic<uint64_t> interposers_attached;
  // --- written by the stage ---
  std::atomic<int64_t> stage_pid;      // the process whose stream writes the word
  // --- each gated process's own slot ---
  GateTaskSlot tasks[kGateTaskSlots];
};
static_assert(sizeof(GatePageLayout) <= kGatePageBytes);
// bench/interposer_cost_gpu.py writes and reads pages of this layout itself.
static_assert(offsetof(GatePageLayout, tasks) == 104 && sizeof(GateTaskSlot) == 80,
              "bump kGatePageVersion and update bench/interposer_cost_gpu.py's offsets");

constexpr uint32_t kAdmissionBeingWritten = 0xffffffffu;

// Reads the admission deadline that `layout` publishes: false while it is
// being written (then nothing is read).  Any process; wait-free.
inline bool ReadAdmission(const GatePageLayout& layout, uint32_t* bubble, int64_t* until_ns) {
  uint32_t first = layout.admit_bubble.load(std::memory_order_acquire);
  if (first == kAdmissionBeingWritten) return false;
  int64_t until = layout.admit_until_ns.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (layout.admit_bubble.load(std::memory_order_relaxed) != first) return false;
  *bubble = first;
  *until_ns = until;
  return true;
}

// The next bubble's forecast, as the daemon published it (see the layout).
struct AheadAdmission {
  uint32_t bubble = kAdmissionBeingWritten;  // matches no bubble: nothing published
  int64_t from_ns = 0;
  int64_t begin_ns = 0;
  int64_t until_ns = 0;
  bool watch_only = false;  // nothing queued behind the shut gate: only watched (the layout's ahead_flags)
};

constexpr uint32_t kAheadWatchOnly = 1u;  // GatePageLayout::ahead_flags

// Reads the next bubble's forecast: false while it is being written (then
// nothing is read).  Any process; wait-free.
inline bool ReadAheadAdmission(const GatePageLayout& layout, AheadAdmission* ahead) {
  uint32_t first = layout.ahead_bubble.load(std::memory_order_acquire);
  if (first == kAdmissionBeingWritten) return false;
  AheadAdmission read;
  read.from_ns = layout.ahead_from_ns.load(std::memory_order_relaxed);
  read.begin_ns = layout.ahead_begin_ns.load(std::memory_order_relaxed);
  read.until_ns = layout.ahead_until_ns.load(std::memory_order_relaxed);
  read.watch_only = (layout.ahead_flags.load(std::memory_order_relaxed) & kAheadWatchOnly) != 0;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (layout.ahead_bubble.load(std::memory_order_relaxed) != first) return false;
  read.bubble = first;
  *ahead = read;
  return true;
}

// Publishes the next bubble's forecast in `layout` (see the layout);
// bubble kAdmissionBeingWritten withdraws it.  One writer at a time.
void PublishAheadAdmission(GatePageLayout* layout, const AheadAdmission& ahead);

// One process's mapping of a gate page.  Not synchronised itself; the
// layout's fields are atomics shared as described above.
class GatePage {
 public:
  // Daemon side: creates the page (mode 0600) or reopens a valid one, and
  // closes its gate: a restarted daemon never inherits an open gate.
  bool CreateOrOpen(const std::string& path, int lane, std::string* error);
  // Stage or task side: maps an existing, valid page read-write (the GPU
  // writes it through this process's registration).
  bool Open(const std::string& path, std::string* error);
  void Close() { mapping_.Reset(); layout_ = nullptr; }
  bool is_open() const { return layout_ != nullptr; }
  GatePageLayout* layout() const { return layout_; }
  // The page's first byte, page-aligned: what cuMemHostRegister takes.
  void* page() const { return mapping_.data(); }
  // True when the page's file was removed after it was mapped (the daemon
  // that made it shut down): a new daemon makes a new page.
  bool mapping_unlinked() const { return mapping_.Unlinked(); }

  // Closes bubble `bubble` if it is still open: true when this call closed
  // it.  Wait-free; any thread or process.
  bool CloseEarly(uint32_t bubble);
  // Publishes bubble `bubble`'s admission deadline (see the layout).  The
  // daemon's lane thread only.
  void PublishAdmission(uint32_t bubble, int64_t until_ns);
  // Publishes the next bubble's forecast (see the layout); bubble
  // kAdmissionBeingWritten withdraws it.  The daemon's lane thread only.
  void PublishAhead(const AheadAdmission& ahead) { PublishAheadAdmission(layout_, ahead); }
  // Claims a task slot for process `pid` (reusing one it already holds):
  // null when all are taken.  Any process.
  GateTaskSlot* ClaimTaskSlot(int64_t pid);
  // The longest published work_p95_ns of the slots whose process `alive`
  // says is alive; slots of dead processes are freed.  Daemon side.
  template <typename Alive>
  int64_t LongestTaskWork(Alive alive) {
    int64_t longest = 0;
    for (GateTaskSlot& slot : layout_->tasks) {
      int64_t pid = slot.pid.load(std::memory_order_acquire);
      if (pid <= 0) continue;
      if (!alive(pid)) {
        // Its fields are zeroed before the slot is free (a dead process
        // writes nothing more), so a process that claims it next is never
        // read with this one's late work or demotion.
        slot.ClearFields();
        slot.pid.compare_exchange_strong(pid, 0, std::memory_order_release);
        continue;
      }
      longest = std::max(longest, slot.work_p95_ns.load(std::memory_order_relaxed));
    }
    return longest;
  }
  // Calls `each(pid, report)` for every claimed slot, with what its process
  // has published (GateTaskReport).  Daemon side.
  template <typename Each>
  void ForEachTaskReport(Each each) const {
    for (const GateTaskSlot& slot : layout_->tasks) {
      int64_t pid = slot.pid.load(std::memory_order_acquire);
      if (pid > 0) each(pid, ReadTaskReport(slot));
    }
  }
  // Sets each claimed slot's `demoted` to `demoted(pid)`.  Daemon side.
  template <typename Demoted>
  void PublishDemotions(Demoted demoted) {
    for (GateTaskSlot& slot : layout_->tasks) {
      const int64_t pid = slot.pid.load(std::memory_order_acquire);
      if (pid > 0) slot.demoted.store(demoted(pid) ? 1u : 0u, std::memory_order_relaxed);
    }
  }
  // Closes whatever bubble is open (the stage went silent or died): true
  // when one was open.  Any thread or process.
  bool ForceClose();

 private:
  SharedMapping mapping_;
  GatePageLayout* layout_ = nullptr;
};

}  // namespace freeride
