// A program's own progress, for programs that do not use the SDK: a line of
// its standard output that a regular expression matches, or a file it
// writes its progress into.  With a capture group the last match's group is
// the progress so far (a cumulative count, "iteration 420"); without one,
// each matching line counts one unit.  A progress file holds a number (its
// last number counts), rewritten as the program goes.
//
// Not synchronised: its owner (the TaskManager, under its lock) calls it.
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <string_view>

namespace freeride {

class ProgressWatch {
 public:
  // An ECMAScript regular expression; false with *error when it does not
  // compile or has more than one capture group.
  static std::string Check(const std::string& regex);

  // `regex` may be empty (then only the file is read); `file` may be empty.
  ProgressWatch(const std::string& regex, std::string stdout_path, std::string file);

  // Reads what the program has written since the last call (its output's new
  // complete lines; the progress file whole) and returns its progress, or
  // nothing when it has shown none yet.
  std::optional<double> Poll();
  // The same, from text given (the output's new bytes): for tests.
  void Feed(std::string_view bytes);
  std::optional<double> progress() const { return progress_; }

 private:
  std::optional<std::regex> regex_;
  bool counted_ = false;  // no capture group: each match counts one
  std::string stdout_path_;
  std::string file_;
  long long offset_ = 0;  // bytes of the output read so far
  std::string partial_;   // an incomplete last line
  std::optional<double> progress_;
};

}  // namespace freeride
