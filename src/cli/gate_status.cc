#include "cli/gate_status.h"

#include <fmt/format.h>

#include "base/units.h"

namespace freeride {

std::string GateStatusLine(const v1::LaneStats& l) {
  if (l.dispatch() != v1::DISPATCH_GPU_GATE) return "";
  return fmt::format(
      "{:>4}  GPU gate: open {}, {} early closes, {} forced; late work {} in {} stretches, pending {}; "
      "held while open: for the deadline {}, for queued work {}, not fitting {}",
      l.lane(), FormatDuration(l.gate_open_ns()), l.gate_early_closes(), l.gate_forced_closes(),
      FormatDuration(l.gate_late_ns()), l.gate_late_bubbles(), FormatDuration(l.gate_pending_ns()),
      FormatDuration(l.gate_held_unpublished_ns()), FormatDuration(l.gate_held_drain_ns()),
      FormatDuration(l.gate_held_fit_ns()));
}

}  // namespace freeride
