// A side task's output logs (stdout.log, stderr.log in its task directory)
// are files the task writes itself, opened O_APPEND at its launch: nothing
// in their path bounds them, and they share the state directory's disk with
// the journal (a task printing in a loop filled it in seconds, and every
// later submission failed).  Trimming keeps each within a size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace freeride {

// A task's output logs in its task directory `task_dir`; what the task
// printed before the last trim is in RotatedFilePath(log, 1).
inline std::string TaskStdoutLog(const std::string& task_dir) { return task_dir + "/stdout.log"; }
inline std::string TaskStderrLog(const std::string& task_dir) { return task_dir + "/stderr.log"; }

// The last `max_bytes` of what a task wrote to the log at `path`, across its
// last trim: the rest from the kept half where the log was emptied since
// (a crash's traceback printed just after a trim).
std::string ReadTaskLogTail(const std::string& path, size_t max_bytes);

// When the file at `path` is larger than `max_bytes` (0: never), copies its
// last max_bytes / 2 bytes to `path`.1 (replacing it, through a temporary
// file) and empties `path` in place, as logrotate's copytruncate does: the
// task's O_APPEND writes go on at the new end.  Output written between the
// copy and the emptying is lost.  Returns true when it emptied the log.  A
// tail that could not be kept (the disk is full) is said in *error, and the
// log is emptied all the same: the task's old output goes before the
// journal's room does.  False, with *error empty, when the file is within
// the size, missing or not a regular file.  One caller per log at a time.
bool TrimTaskLog(const std::string& path, uint64_t max_bytes, std::string* error);

}  // namespace freeride
