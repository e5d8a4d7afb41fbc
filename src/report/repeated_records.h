// Finds the records of a read event log that describe a bubble or a step
// already in it, so that `freeride report` and `freeride timeline` count
// each once.  A log with lines in it twice (a copy concatenated to itself, a
// backup joined to the log it overlaps) would otherwise add the same idle
// time, harvest, overrun and side-task work again.  What is left out is
// counted, never hidden: DroppedRecordsMessage says it for the report's
// notes and the command's warning.
#pragma once
#include <string>

#include "report/event_log_reader.h"

namespace freeride::report {

// Removes from log->bubbles each record that repeats or overlaps in time one
// kept on the same lane, and from log->steps each record identical to
// another (every field: the same line twice), counting them in
// log->dropped_bubbles and log->dropped_steps.
//
// A lane's bubbles follow one another (one stage's marks), so two that
// overlap are one bubble written twice; of those the earliest-beginning one
// is kept, and of identical ones the first in the file.  Two that begin at
// the same time repeat one another only with the same seq and slot: bubbles
// the lane missed are closed back to back, length 0, at one instant.  A bubble closed
// without its end mark (`stale`, `stage_gone`) ends at the dispatcher's own
// time, which the next bubble's begin mark can precede: only a record with
// its begin repeats it.  Times are compared only between records of one boot
// (unix_ns - ts_ns within a minute), since CLOCK_MONOTONIC starts again at a
// reboot and a state directory outlives one.
//
// Of identical steps the last in the file is kept, and each task's
// steps_before_start is moved to the kept records: steps before a task's
// latest start are superseded by it, and in a log pasted in twice that start
// is the copy's.  Steps are dropped only when identical: two different
// records of a task at overlapping times are no copy of one another, and the
// log does not say which is right.
//
// The kept records stay in file order.
void DropRepeatedRecords(EventLogData* log);

// What DropRepeatedRecords left out of `log`, for a note or a warning: ""
// when nothing.
std::string DroppedRecordsMessage(const EventLogData& log);

}  // namespace freeride::report
