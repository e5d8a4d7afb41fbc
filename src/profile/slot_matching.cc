#include "profile/slot_matching.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "profile/sample_stats.h"

namespace freeride::profile {
namespace {

struct Interval {
  double start = 0, end = 0;
};

double Overlap(const Interval& a, const Interval& b) {
  return std::max(0.0, std::min(a.end, b.end) - std::max(a.start, b.start));
}

Interval Span(const Gap& g) { return {g.start_ms, g.start_ms + g.duration_ms}; }

// A slot while matching: its gaps by iteration, and where it lies (the
// median start and end of its gaps so far).
struct Slot {
  std::map<size_t, size_t> gap_of_iteration;
  Interval where;
};

void Place(Slot& slot, const std::vector<std::vector<Gap>>& gaps) {
  std::vector<double> starts, ends;
  for (auto [it, g] : slot.gap_of_iteration) {
    starts.push_back(gaps[it][g].start_ms);
    ends.push_back(gaps[it][g].start_ms + gaps[it][g].duration_ms);
  }
  slot.where = {Median(starts), Median(ends)};
}

// Gaps of two iterations may be one slot when they overlap, or lie apart by
// less than the shorter one's length: the iterations' windows start a
// little earlier or later relative to the work, so gaps drift.
bool Matchable(const Interval& a, const Interval& b) {
  double apart = std::max(a.start, b.start) - std::min(a.end, b.end);
  return apart < std::min(a.end - a.start, b.end - b.start);
}

double Distance(const Interval& a, const Interval& b) {
  return std::abs(a.start - b.start) + std::abs(a.end - b.end);
}

// The order-keeping matching of `iteration`'s gaps to `slots` (by start)
// that matches the most gaps, and of those the one whose pairs lie closest.
// Returns, per gap, the slot index or -1.
std::vector<int> Align(const std::vector<Gap>& iteration, const std::vector<Slot>& slots) {
  size_t n = iteration.size(), m = slots.size();
  // best[i][j]: (pairs, -distance) of the best matching of gaps [i, n) to slots [j, m).
  using Score = std::pair<int, double>;
  auto plus = [](Score a, const Score& b) { return Score{a.first + b.first, a.second + b.second}; };
  std::vector<std::vector<Score>> best(n + 1, std::vector<Score>(m + 1, Score{0, 0}));
  auto pair_score = [&](size_t i, size_t j) -> std::optional<Score> {
    Interval g = Span(iteration[i]);
    if (!Matchable(g, slots[j].where)) return std::nullopt;
    return Score{1, -Distance(g, slots[j].where)};
  };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;) {
      Score value = std::max(best[i + 1][j], best[i][j + 1]);
      if (auto pair = pair_score(i, j)) value = std::max(value, plus(*pair, best[i + 1][j + 1]));
      best[i][j] = value;
    }
  std::vector<int> match(n, -1);
  for (size_t i = 0, j = 0; i < n && j < m;) {
    auto pair = pair_score(i, j);
    if (pair && best[i][j] == plus(*pair, best[i + 1][j + 1])) {
      match[i++] = static_cast<int>(j++);
    } else if (best[i][j] == best[i + 1][j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return match;
}

BubbleType MostCommonType(const Slot& slot, const std::vector<std::vector<Gap>>& gaps) {
  std::map<BubbleType, int> count;
  for (auto [it, g] : slot.gap_of_iteration) ++count[gaps[it][g].type];
  // Ties go to the type listed first (fill, warmup_wait, steady, drain).
  return std::max_element(count.begin(), count.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

// A gap of an iteration that lacks `other` lies where `other` has a gap in
// another iteration, and the two slots overlap where they typically lie:
// they are one place, told apart differently.  (Where they do not overlap,
// the iteration is an outlier whose gap swallowed the other's place, e.g. a
// long first wait, and the slots describe the others.)
std::string Conflict(const Slot& slot, const Slot& other, const std::vector<std::vector<Gap>>& gaps,
                     const std::vector<int>& steps) {
  if (Overlap(slot.where, other.where) <= 0) return {};
  for (auto [it, g] : slot.gap_of_iteration) {
    if (other.gap_of_iteration.count(it)) continue;
    for (auto [other_it, other_g] : other.gap_of_iteration) {
      const Gap& a = gaps[it][g];
      const Gap& b = gaps[other_it][other_g];
      if (Overlap(Span(a), Span(b)) <= 0) continue;
      return fmt::format(
          "the iterations' gaps do not line up into slots: step {} has a {:.2f} ms gap at "
          "{:.2f} ms where step {} has a different one ({:.2f} ms at {:.2f} ms); the gaps move "
          "or split from one iteration to the next, so no one list of bubbles fits them all",
          steps[it], a.duration_ms, a.start_ms, steps[other_it], b.duration_ms, b.start_ms);
    }
  }
  return {};
}

}  // namespace

SlotMatch MatchSlots(std::vector<std::vector<Gap>>& gaps, const std::vector<int>& steps,
                     const std::vector<double>& lengths) {
  SlotMatch out;
  // The iteration with the most gaps first: the others are aligned to it.
  std::vector<size_t> order(gaps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return gaps[a].size() > gaps[b].size(); });
  std::vector<Slot> slots;
  for (size_t it : order) {
    // Align's table has a cell per gap and slot: gaps of a few microseconds
    // (--min-bubble-ms 0) ran a 34 MB trace to 24 GB.
    if (gaps[it].size() * std::max<size_t>(1, slots.size()) > kMaxAlignCells) {
      out.conflict = fmt::format(
          "step {} has {} gaps, and the iterations before it {} slots: too many to line up "
          "(at most {} gap-slot pairs). Raise --min-bubble-ms: gaps that short hold no side work",
          steps[it], gaps[it].size(), slots.size(), kMaxAlignCells);
      return out;
    }
    std::vector<int> match = Align(gaps[it], slots);
    for (size_t g = 0; g < gaps[it].size(); ++g) {
      if (match[g] >= 0) {
        slots[match[g]].gap_of_iteration[it] = g;
      } else {
        Slot fresh;
        fresh.gap_of_iteration[it] = g;
        slots.push_back(std::move(fresh));
      }
    }
    for (Slot& s : slots) Place(s, gaps);
    std::stable_sort(slots.begin(), slots.end(),
                     [](const Slot& a, const Slot& b) { return a.where.start < b.where.start; });
  }

  // A slot fewer than half the iterations have that conflicts with one more
  // than half have is the minority's split or merge of that gap: its gaps
  // are left out of the slots (they stay idle time).  Any other conflict
  // leaves no list of slots.
  const size_t iterations = gaps.size();
  auto minority = [&](const Slot& s) { return 2 * s.gap_of_iteration.size() < iterations; };
  auto majority = [&](const Slot& s) { return 2 * s.gap_of_iteration.size() > iterations; };
  std::vector<bool> left_out(slots.size(), false);
  for (size_t a = 0; a < slots.size(); ++a)
    for (size_t b = 0; b < slots.size() && !left_out[a]; ++b)
      if (a != b && minority(slots[a]) && majority(slots[b]) &&
          (!Conflict(slots[a], slots[b], gaps, steps).empty() ||
           !Conflict(slots[b], slots[a], gaps, steps).empty()))
        left_out[a] = true;
  auto leave_out = [&](const Slot& slot) {
    for (auto [it, g] : slot.gap_of_iteration) {
      ++out.left_out_gaps;
      out.left_out_ms += gaps[it][g].duration_ms;
    }
  };
  std::vector<Slot> kept;
  for (size_t k = 0; k < slots.size(); ++k) {
    if (left_out[k])
      leave_out(slots[k]);
    else
      kept.push_back(std::move(slots[k]));
  }
  slots = std::move(kept);
  for (size_t a = 0; a < slots.size(); ++a)
    for (size_t b = 0; b < slots.size(); ++b) {
      if (a == b) continue;
      std::string conflict = Conflict(slots[a], slots[b], gaps, steps);
      if (!conflict.empty()) {
        out.conflict = std::move(conflict);
        return out;
      }
    }

  std::vector<SlotSummary> summaries;
  for (const Slot& slot : slots) {
    std::vector<double> starts, durations;
    for (auto [it, g] : slot.gap_of_iteration) {
      starts.push_back(gaps[it][g].start_ms);
      durations.push_back(gaps[it][g].duration_ms);
    }
    SlotSummary s;
    s.type = MostCommonType(slot, gaps);
    s.iterations = static_cast<int>(durations.size());
    s.start_ms = Median(starts);
    s.median_ms = Median(durations);
    s.p10_ms = Quantile(durations, 0.10);
    s.min_ms = *std::min_element(durations.begin(), durations.end());
    s.max_ms = *std::max_element(durations.begin(), durations.end());
    if (!summaries.empty())
      s.start_ms = std::max(s.start_ms, summaries.back().start_ms + summaries.back().median_ms);
    summaries.push_back(s);
  }
  // The slots describe the median iteration, so they must end within it.
  // Past its end lie the tails of longer iterations: a slot only a minority
  // has there is left out; one most have (a drain) ends with the iteration.
  std::vector<bool> keep(slots.size(), true);
  double limit = Median(lengths);
  for (size_t k = summaries.size(); k-- > 0;) {
    SlotSummary& s = summaries[k];
    if (s.start_ms + s.median_ms > limit) {
      if (minority(slots[k])) {
        keep[k] = false;
        leave_out(slots[k]);
        continue;
      }
      s.start_ms = limit - s.median_ms;
    }
    limit = s.start_ms;
  }
  double end = 0;
  for (size_t k = 0; k < summaries.size(); ++k) {
    if (!keep[k]) continue;
    if (summaries[k].start_ms < end - 1e-9) {
      out.conflict = fmt::format(
          "the slots' median lengths do not fit in the median iteration ({:.2f} ms): its gaps "
          "lie too differently from one iteration to the next",
          Median(lengths));
      out.slots.clear();
      return out;
    }
    for (auto [it, g] : slots[k].gap_of_iteration) gaps[it][g].slot = static_cast<int>(out.slots.size());
    end = summaries[k].start_ms + summaries[k].median_ms;
    out.slots.push_back(summaries[k]);
  }
  return out;
}

}  // namespace freeride::profile
