#include "cli/gate_status.h"

#include <gtest/gtest.h>

namespace freeride {
namespace {

TEST(GateStatus, AGatedLanesLineGivesItsGateFiguresAndAHostLaneHasNone) {
  v1::LaneStats lane;
  lane.set_lane(1);
  lane.set_gate_open_ns(2'500'000'000);
  lane.set_gate_early_closes(40);
  lane.set_gate_late_ns(3'000'000);
  lane.set_gate_late_bubbles(6);
  lane.set_gate_pending_ns(125'000'000);
  lane.set_gate_held_unpublished_ns(1'500);
  lane.set_gate_held_drain_ns(20'000'000);
  lane.set_gate_held_fit_ns(500'000'000);
  EXPECT_EQ(GateStatusLine(lane), "") << "dispatched from the host: no gate";
  lane.set_dispatch(v1::DISPATCH_GPU_GATE);
  EXPECT_EQ(GateStatusLine(lane),
            "   1  GPU gate: open 2.50 s, 40 early closes, 0 forced; late work 3.00 ms in 6 stretches, "
            "pending 125.00 ms; held while open: for the deadline 1.5 us, for queued work 20.00 ms, "
            "not fitting 500.00 ms");
}

}  // namespace
}  // namespace freeride
