// A program's own progress, for programs that do not use the SDK: a line of
// its output (standard output, standard error, or both: tqdm and Python's
// logging write to standard error) that a regular expression matches, or a
// file it writes its progress into.  Of two outputs, the one with more
// matching lines is the one that carries the progress (ties: the one whose
// match was read last): with a capture group its last match's group is the
// progress so far (a cumulative count, "iteration 420"; a one-off match on
// the other output, a warning naming "step 5000", or a per-epoch count
// there, does not take its place); without one, each of its matching lines
// counts one unit (a program that logs each step to both counts it once).
// A progress file holds a number (its last number counts), rewritten as the
// program goes.  Output written before the watch was made (an earlier
// attempt's, whose progress the caller keeps apart) is not read.
//
// The regex is RE2's (the syntax of Go's regexp and most of Python's re: no
// backreferences, no lookaround), searched for anywhere in a line.  Both the
// regex and the output come from users, and the daemon matches them: RE2
// takes time linear in the line, with no recursion.  (std::regex, before it,
// took seconds on `(a+)+b` and a 30-character line, and recursed once per
// character, so one 100 KB line overflowed the daemon's stack.)  A line ends
// at '\n' or '\r', so that a progress bar that rewrites its line (tqdm) is
// read as it goes.
//
// Not synchronised: its owner (the TaskManager, under its lock) calls it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace freeride {

class ProgressWatch {
 public:
  // "" when `regex` compiles and has at most one capture group; else why not.
  static std::string Check(const std::string& regex);
  // "" when `path` is absent or a regular file; else why it cannot be a
  // progress file (a FIFO or a device would block or never end a read).
  static std::string CheckFile(const std::string& path);

  // `regex` may be empty (then only the file is read); `outputs` are the
  // files the program's output streams are written to (its stdout.log,
  // stderr.log; none: only Feed gives output), read from their size now;
  // `file` may be empty.
  ProgressWatch(const std::string& regex, std::vector<std::string> outputs, std::string file);
  ~ProgressWatch();

  // Reads what the program has written since the last call (its outputs' new
  // complete lines; the progress file whole, if it is a regular file of at
  // most 4 KiB) and returns its progress, or nothing when it has shown none
  // yet.  Reads at most 1 MiB of each output a call, and never blocks.
  std::optional<double> Poll();
  // The same, from text given (output `output`'s new bytes): for tests.
  void Feed(std::string_view bytes, size_t output = 0);
  // The output at `path` was emptied in place (daemon/task_logs.h): it is
  // read from its start from now on, and a line cut by the emptying is
  // dropped.  Call between Polls, on the polling thread.
  void Emptied(const std::string& path);
  std::optional<double> progress() const { return progress_; }

 private:
  // One output stream, read on from where the last read ended.
  struct Output {
    std::string path;
    long long offset = 0;     // bytes read so far
    std::string partial;      // an incomplete last line
    bool ended_at_cr = false;  // the bytes read so far ended with a line's "\r": a "\n" next is its
    std::optional<double> shown;  // its last match's value (a capture group)
    uint64_t shown_seq = 0;       // when its last match was read, in all outputs' matches
    double counted = 0;           // its matching lines
  };
  void Match(Output& output, std::string_view line);
  void Read(Output& output);
  void Sum();  // progress_ from the outputs

  std::unique_ptr<re2::RE2> regex_;
  bool counted_ = false;  // no capture group: each match counts one
  std::vector<Output> outputs_;  // at least one (Feed's, without a path)
  uint64_t matches_ = 0;         // matching lines read, over all outputs
  std::string file_;
  std::optional<double> progress_;
};

}  // namespace freeride
