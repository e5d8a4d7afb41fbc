// The calling thread's stream-capture mode, made relaxed for a scope, so
// that its driver calls (an event record or query, a stream query) cannot
// invalidate another thread's capture of a graph in global mode.  Used by
// the interposer (gate/launch_gate.cc) and by the stage's gate writes
// (channel/stream_marks.cc), each with the exchange function it found.
//
// Threading: the mode is the calling thread's; make and end it on one thread.
#pragma once
#include "gate/driver_types.h"

namespace freeride::gate {

class RelaxedCaptureMode {
 public:
  // cuThreadExchangeStreamCaptureMode, or null where the driver lacks it.
  using Exchange = CuResult (*)(int* mode);

  // Exchanges the thread's mode for relaxed; active() says whether it was.
  explicit RelaxedCaptureMode(Exchange exchange) : exchange_(exchange) {
    if (exchange_ && exchange_(&mode_) == kCudaSuccess) active_ = true;
  }
  // Puts the thread's own mode back.
  ~RelaxedCaptureMode() {
    if (active_) exchange_(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

  bool active() const { return active_; }

 private:
  Exchange exchange_;
  int mode_ = kCaptureModeRelaxed;
  bool active_ = false;
};

}  // namespace freeride::gate
