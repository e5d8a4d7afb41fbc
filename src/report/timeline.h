// Pictures of a run from its event log: a Perfetto/Chrome trace with one
// track group per GPU (training busy time, bubbles, side-task steps), and an
// SVG of a few iterations that a person can read at a glance.
#pragma once
#include <string>

#include "report/event_log_reader.h"

namespace freeride::report {

// The Chrome trace-event JSON (loads in ui.perfetto.dev and chrome://tracing).
// Times are microseconds from the first event in the log.  Busy spans are the
// gaps between a lane's bubbles that are shorter than three iterations (a
// longer gap is time the log knows nothing about).
std::string RenderPerfettoTrace(const EventLogData& log);

struct SvgWindow {
  int iterations = 3;        // how many iterations to draw
  int first_iteration = -1;  // index into the run's iterations; -1: the middle of the run
};

// An SVG of `window`: one row per GPU with training time, bubbles, and the
// side-task steps inside them coloured by task, overruns in red.  Without
// iterations in the log (no slot seen twice) it draws the first 500 ms.
std::string RenderTimelineSvg(const EventLogData& log, const SvgWindow& window);

}  // namespace freeride::report
