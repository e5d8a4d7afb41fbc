// The work a checkpoint holds, recorded next to it.
//
// A task resumed from a checkpoint has done the work up to that checkpoint,
// no more: the steps it did after it were lost with the process and are done
// again.  So its progress restarts from the checkpoint's, which is written in
// CHECKPOINT.progress when the checkpoint is saved, and counted once.
//
// The sidecar names the checkpoint file it describes (inode and size), for
// the new checkpoint and the one before: it is written before the new
// checkpoint is renamed into place, so whichever of the two a crash leaves
// under the name, the sidecar describes it.
//
// Plain functions of the file system; callable from any thread, but one
// saver per path at a time (the temporary names are fixed).  The sidecar
// is the task's to write: readers treat it as untrusted (ReadCheckpointProgress
// refuses anything that does not parse into finite, non-negative figures).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace freeride {

struct CheckpointProgress {
  double progress = 0;  // units of work the checkpoint holds
  uint64_t steps = 0;   // steps that did them
};

// Has `save` write the checkpoint to a temporary file, records `done` for it
// in the sidecar, then renames it to `path`.  False when `save` or a file
// operation fails (the previous checkpoint then stays).
bool SaveCheckpointWithProgress(const std::string& path,
                                const std::function<bool(const std::string& tmp_path)>& save,
                                const CheckpointProgress& done);

// The work the checkpoint now at `path` holds; nullopt when there is no
// checkpoint, or no sidecar entry describes it (saved by something else).
std::optional<CheckpointProgress> ReadCheckpointProgress(const std::string& path);

}  // namespace freeride
