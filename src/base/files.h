// Files that are never seen half-written.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace freeride {

// Has `write` fill PATH.tmp, then renames it to `path`, so that a crash or a
// stop of the process never leaves a torn file under the final name.  There
// is no fsync: a checkpoint saved during a cancel's grace period must not
// wait for the disk, and after a power loss a checkpoint whose size no
// longer matches its progress record is not trusted (checkpoint_progress.h).  Returns false (and
// removes the temporary file) when `write` returns false or the rename
// fails; *error, if given, then says why.  Any thread, but never two
// writers of one path at once: they would share PATH.tmp.
bool ReplaceFileAtomically(const std::string& path,
                           const std::function<bool(const std::string& tmp_path)>& write,
                           std::string* error = nullptr);

// The same for a file's whole content; false also when it cannot be
// written in full.
bool WriteFileAtomically(const std::string& path, std::string_view content,
                         std::string* error = nullptr);

// The `index`-th older file of a log rotated by size: PATH.1 is the newest.
std::string RotatedFilePath(const std::string& path, int index);

// A rotated log's files that exist, oldest first: PATH.N ... PATH.1, PATH.
// The numbered files are followed from PATH.1 up to the first one missing.
std::vector<std::string> RotatedFilesOldestFirst(const std::string& path);

// The whole content of a file; nullopt when it cannot be opened.
std::optional<std::string> ReadWholeFile(const std::string& path);

// The whole content of a file given as input, up to `max_bytes`; nullopt,
// with *error saying why (it cannot be opened, is a directory, or is larger,
// as /dev/zero is), otherwise.  Pipes are read too.
std::optional<std::string> ReadInputFile(const std::string& path, size_t max_bytes, std::string* error);

// The first of `inputs` that writing `output` would overwrite (the same file
// by another name or link included), or "" when none.  Inputs that do not
// exist are skipped.  For an output option beside input arguments, e.g.
// `timeline LOG --svg LOG`, which replaced the event log with a picture.
std::string InputOverwrittenBy(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace freeride
