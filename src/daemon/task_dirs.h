// The task directories (STATE/tasks/<id>) and their tie to the journal.
//
// Each directory holds a file, `journal`, with the UUID of the journal that
// knows its task.  A directory is used only by a task of that journal, so a
// new or replaced journal can never hand an old task's checkpoint to a new
// task.  A directory whose task the journal lost is marked orphaned (a file
// `orphaned` saying why): kept for the user, never used, and its id never
// given again.
//
// Plain functions of the file system; callable from any thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace freeride {

// Creates `dir` (mode 0700, parents too) tied to `journal_uuid`, or checks
// that an existing one is tied to it.  kFailedPrecondition when it belongs to
// another journal or is orphaned; the error of the file system otherwise.
Status EnsureTaskDir(const std::string& dir, const std::string& journal_uuid);

// The UUID of the journal `dir` is tied to; "" when it has none (an untied
// directory, or not a task directory).
std::string TaskDirJournal(const std::string& dir);

// Ties an existing directory to `journal_uuid` (adopting an untied one).
// kResourceExhausted when the disk is full, kUnavailable on other errors.
Status TieTaskDir(const std::string& dir, const std::string& journal_uuid);

// Marks `dir` orphaned, saying `why`; errors as for TieTaskDir.
Status MarkTaskDirOrphaned(const std::string& dir, const std::string& why);
// Whether `dir` is marked orphaned.
bool TaskDirOrphaned(const std::string& dir);

// The ids of the directories under `tasks_dir` whose names are task ids,
// ascending; empty when it cannot be read.
std::vector<int64_t> ListTaskDirIds(const std::string& tasks_dir);

}  // namespace freeride
