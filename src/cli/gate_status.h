// The GPU gate's figures of one lane as `freeride status` prints them: how
// long the gate stood open, the side work found late or pending after its
// bubbles closed, and where an open gate's time went unused (the programs'
// threads held while it was open, by why; docs/gate.md).  Pure.
#pragma once
#include <string>

#include "freeride.pb.h"

namespace freeride {

// One line for a lane whose tasks the GPU gate dispatches; "" for a lane
// dispatched from the host (no gate).
std::string GateStatusLine(const v1::LaneStats& lane);

}  // namespace freeride
