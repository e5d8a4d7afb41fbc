// The GPU gate of one lane: a page of shared memory whose first word a side
// task's GPU streams wait on before each piece of work, and that the
// training stage's own CUDA stream opens and closes.
//
// Word encoding: (bubble << 1) | open.  The stage's stream writes
// OpenValue(n) where its bubble n begins and ClosedValue(n) where it ends
// (cuStreamWriteValue32, so the trainer's path gains no host callback and no
// wait).  Side streams wait with CU_STREAM_WAIT_VALUE_AND and mask 1, so
// they pass exactly while some bubble is open.  The daemon may close bubble
// n early, on the CPU, with a compare-and-swap from OpenValue(n) to
// ClosedValue(n): it closes that bubble only, never a later one that the
// stage has opened meanwhile.
//
// Writers: the stage's GPU stream (word), the daemon (word by CAS, and the
// counters below), the interposer in each task (its registration count).
// The page is registered with cuMemHostRegister in the stage and in each
// task, so the GPU reads and writes it over the bus; the daemon needs no
// CUDA at all.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "channel/shared_mapping.h"

namespace freeride {

constexpr uint64_t kGatePageMagic = 0x4652474154453031ULL;  // "FRGATE01"
constexpr uint32_t kGatePageVersion = 1;
constexpr size_t kGatePageBytes = 4096;

// The value the stage's stream writes at the begin (end) of its bubble n.
constexpr uint32_t GateOpenValue(uint32_t bubble) { return (bubble << 1) | 1u; }
constexpr uint32_t GateClosedValue(uint32_t bubble) { return bubble << 1; }
constexpr bool GateIsOpen(uint32_t word) { return (word & 1u) != 0; }

struct GatePageLayout {
  // First in the page: the word the GPU reads and writes.
  std::atomic<uint32_t> word;
  uint32_t reserved;
  uint64_t magic;
  uint32_t version;
  int32_t lane;
  // --- written by the daemon ---
  std::atomic<uint64_t> early_closes;  // bubbles closed before their end mark
  std::atomic<uint64_t> forced_closes; // gates closed for a silent or dead stage
  // --- written by each interposer, once, as it registers the page ---
  std::atomic<uint64_t> interposers_attached;
  // --- written by the stage ---
  std::atomic<int64_t> stage_pid;      // the process whose stream writes the word
};
static_assert(sizeof(GatePageLayout) <= kGatePageBytes);

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
  // Closes whatever bubble is open (the stage went silent or died): true
  // when one was open.  Any thread or process.
  bool ForceClose();

 private:
  SharedMapping mapping_;
  GatePageLayout* layout_ = nullptr;
};

}  // namespace freeride
