// The learned length of each kind of piece a program submits: a kernel by
// its function and its launch's shape, a graph by its executable, a copy or
// fill by its size (gate/piece_key.h names them).  One 95th percentile for
// every piece (gate/work_lengths.h) stands badly for a program whose pieces
// differ by orders of magnitude (an element-wise kernel and a large
// convolution): near a deadline a large piece taken at the percentile runs
// on past the bubble (its wait then left pending through the busy time),
// while a small one taken at it is held for nothing.  A piece whose
// kind has been timed is predicted by the longest of its kind's last few
// lengths instead; the others keep the common percentile.
//
// A fixed table (no allocation after construction): when it is full it is
// emptied and the kinds still in use are learned again, so that a program
// whose launches keep changing shape (a growing sequence) cannot fill it for
// good with shapes it no longer launches.
//
// Threading: not synchronised; its owner serialises the calls.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace freeride::gate {

class PieceLengths {
 public:
  // Kinds kept at most before the table is emptied, and lengths kept per kind.
  static constexpr size_t kCapacity = 2048;
  static constexpr size_t kRecent = 4;
  static_assert((kCapacity & (kCapacity - 1)) == 0, "the table's size is a power of two");

  PieceLengths() : slots_(2 * kCapacity) {}

  // Adds a length of a piece of kind `key` (0, no kind, and negative lengths
  // are ignored).
  void Add(uint64_t key, int64_t ns) {
    if (key == 0 || ns < 0) return;
    Slot* slot = Find(key);
    if (!slot) {
      if (kinds_ >= kCapacity) Clear();
      slot = Insert(key);
    }
    slot->recent[slot->next++ % kRecent] = ns;
    slot->count = std::min<uint32_t>(slot->count + 1, kRecent);
  }
  // The longest of the kind's last kRecent lengths: 0 when it has none.
  int64_t Estimate(uint64_t key) const {
    const Slot* slot = key == 0 ? nullptr : Find(key);
    if (!slot || slot->count == 0) return 0;
    return *std::max_element(slot->recent.begin(), slot->recent.begin() + slot->count);
  }
  // Lengths of the kind learned (up to kRecent).
  uint32_t Count(uint64_t key) const {
    const Slot* slot = key == 0 ? nullptr : Find(key);
    return slot ? slot->count : 0;
  }
  // Notes that a piece of kind `key` is being timed for its kind; returns
  // how many were before it.  (Its length comes back later, by Add: this
  // keeps the pieces of a new kind that are timed before then few.)
  uint32_t NoteTiming(uint64_t key) {
    if (key == 0) return 0;
    Slot* slot = Find(key);
    if (!slot) {
      if (kinds_ >= kCapacity) Clear();
      slot = Insert(key);
    }
    const uint32_t before = slot->timings;
    if (slot->timings < UINT32_MAX) ++slot->timings;
    return before;
  }
  // Forgets what was learned of kind `key` (its lengths and its timings), so
  // that it is predicted as a piece of no learned kind and learned afresh;
  // counts the forgetting (Forgets).
  void Forget(uint64_t key) {
    Slot* slot = key == 0 ? nullptr : Find(key);
    if (!slot) return;
    const uint32_t forgets = slot->forgets < UINT32_MAX ? slot->forgets + 1 : slot->forgets;
    *slot = Slot{};
    slot->key = key;
    slot->forgets = forgets;
  }
  // Times kind `key` was forgotten since a piece of it last fitted at its
  // learned length (NoteFitted): 0 for a kind never forgotten or not kept.
  uint32_t Forgets(uint64_t key) const {
    const Slot* slot = key == 0 ? nullptr : Find(key);
    return slot ? slot->forgets : 0;
  }
  // A piece of kind `key` was let in at its learned length: its forgettings
  // in a row end.
  void NoteFitted(uint64_t key) {
    if (Slot* slot = key == 0 ? nullptr : Find(key)) slot->forgets = 0;
  }
  // Kinds kept (timed or learned), and times the table was emptied for being full.
  size_t kinds() const { return kinds_; }
  uint64_t clears() const { return clears_; }

 private:
  struct Slot {
    uint64_t key = 0;  // 0: free
    std::array<int64_t, kRecent> recent{};
    uint32_t count = 0;
    uint32_t next = 0;
    uint32_t timings = 0;  // NoteTiming's
    uint32_t forgets = 0;  // Forget's, since NoteFitted
  };
  // Open addressing, linear probing, in a table twice the capacity: a probe
  // ends at a free slot well before it has gone far.
  size_t Home(uint64_t key) const {
    key ^= key >> 33;  // the key is a mix already (piece_key.h); fold its high bits in
    return static_cast<size_t>(key) & (slots_.size() - 1);
  }
  const Slot* Find(uint64_t key) const {
    for (size_t i = Home(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == 0) return nullptr;
    }
  }
  Slot* Find(uint64_t key) { return const_cast<Slot*>(std::as_const(*this).Find(key)); }
  Slot* Insert(uint64_t key) {
    size_t i = Home(key);
    while (slots_[i].key != 0) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = Slot{};
    slots_[i].key = key;
    ++kinds_;
    return &slots_[i];
  }
  void Clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    kinds_ = 0;
    ++clears_;
  }

  std::vector<Slot> slots_;  // a power of two, never resized
  size_t kinds_ = 0;
  uint64_t clears_ = 0;
};

}  // namespace freeride::gate
