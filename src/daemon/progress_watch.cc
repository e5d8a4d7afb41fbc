#include "daemon/progress_watch.h"

#include <fcntl.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

namespace freeride {

namespace {

constexpr size_t kMaxRead = 1 << 20;  // per poll: a chatty program is read over several
constexpr size_t kMaxProgressFile = 4096;

std::optional<double> LastNumber(std::string_view text) {
  const std::string copy(text);  // strtod needs a terminated string
  std::optional<double> last;
  const char* p = copy.c_str();
  while (*p) {
    char* end = nullptr;
    double value = std::strtod(p, &end);
    if (end != p && std::isfinite(value)) {
      last = value;
      p = end;
    } else {
      ++p;
    }
  }
  return last;
}

RE2::Options ProgressOptions() {
  RE2::Options options;
  options.set_log_errors(false);  // the error goes back to the submitter, not to the daemon's log
  // Bytes, as std::regex matched them: a program's output need not be UTF-8
  // (`.` would not match a Latin-1 byte), and a UTF-8 literal in the regex
  // still matches its own bytes.
  options.set_encoding(RE2::Options::EncodingLatin1);
  return options;
}

// The last number in a regular file of at most kMaxProgressFile bytes; a
// FIFO, a device or a directory is not read at all (opened without blocking).
std::optional<double> ReadProgressFile(const std::string& path) {
  // Looked at before it is opened: opening a FIFO lets its writer's open
  // through (and its next write fail once this closes), and opening some
  // devices does things.  Checked again on the open file, which may have
  // been replaced in between.
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  char buffer[kMaxProgressFile + 1];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = read(fd, buffer, sizeof buffer);
  close(fd);
  if (n < 0 || static_cast<size_t>(n) > kMaxProgressFile) return std::nullopt;
  return LastNumber(std::string_view(buffer, static_cast<size_t>(n)));
}

}  // namespace

std::string ProgressWatch::Check(const std::string& regex) {
  RE2 compiled(regex, ProgressOptions());
  if (!compiled.ok())
    return "the progress regex does not compile: " + compiled.error() +
           " (RE2 syntax: as Python's re, without backreferences or lookaround)";
  if (compiled.NumberOfCapturingGroups() > 1)
    return "the progress regex has more than one capture group: give it one (the progress so "
           "far) or none (each matching line counts one); (?:...) groups without capturing";
  return "";
}

std::string ProgressWatch::CheckFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return "the progress file " + path +
         " is not a regular file (a FIFO, a device or a directory): give a file the program rewrites";
}

ProgressWatch::ProgressWatch(const std::string& regex, std::vector<std::string> outputs, std::string file)
    : file_(std::move(file)) {
  if (!regex.empty() && Check(regex).empty()) {
    regex_ = std::make_unique<RE2>(regex, ProgressOptions());
    counted_ = regex_->NumberOfCapturingGroups() == 0;
  }
  for (std::string& path : outputs) {
    // Appended to across attempts: an earlier attempt's lines are its progress, not this one's.
    struct stat st;
    const long long size = !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
    outputs_.push_back(Output{std::move(path), size});
  }
  if (outputs_.empty()) outputs_.emplace_back();
}

ProgressWatch::~ProgressWatch() = default;

void ProgressWatch::Match(Output& output, std::string_view line) {
  if (!regex_) return;
  const re2::StringPiece text(line.data(), line.size());
  if (counted_) {
    if (RE2::PartialMatch(text, *regex_)) {
      output.counted += 1;
      output.shown_seq = ++matches_;
    }
    return;
  }
  re2::StringPiece group;
  if (!RE2::PartialMatch(text, *regex_, &group)) return;
  // A negative value is no count of work (a date's "2024-06-01" reads -1),
  // as in a progress file: the line is not a progress line.
  if (auto value = LastNumber(std::string_view(group.data(), group.size())); value && *value >= 0) {
    output.shown = *value;
    output.counted += 1;
    output.shown_seq = ++matches_;
  }
}

void ProgressWatch::Feed(std::string_view bytes, size_t index) {
  if (index >= outputs_.size()) return;
  Output& output = outputs_[index];
  // "\r\n" ends one line, not a line and an empty one (which a regex
  // matching the empty string would count), even when a read ends between them.
  if (output.ended_at_cr && !bytes.empty() && bytes.front() == '\n') bytes.remove_prefix(1);
  if (!bytes.empty()) output.ended_at_cr = false;
  std::string& partial = output.partial;
  partial.append(bytes);
  size_t start = 0, end;
  while ((end = partial.find_first_of("\r\n", start)) != std::string::npos) {
    Match(output, std::string_view(partial).substr(start, end - start));
    const bool crlf = partial[end] == '\r' && end + 1 < partial.size() && partial[end + 1] == '\n';
    output.ended_at_cr = partial[end] == '\r' && end + 1 == partial.size();
    start = end + (crlf ? 2 : 1);
  }
  partial.erase(0, start);
  if (partial.size() > kMaxRead) partial.clear();  // a line without end: not a progress line
  Sum();
}

void ProgressWatch::Sum() {
  const Output* carrier = nullptr;  // the output with the most matching lines
  for (const Output& output : outputs_)
    if (output.counted > 0 && (!carrier || output.counted > carrier->counted ||
                               (output.counted == carrier->counted && output.shown_seq > carrier->shown_seq)))
      carrier = &output;
  if (!carrier) return;
  if (counted_) progress_ = carrier->counted;
  else if (carrier->shown) progress_ = carrier->shown;
}

void ProgressWatch::Emptied(const std::string& path) {
  for (Output& output : outputs_)
    if (output.path == path) {
      // Without this, output written past the old offset before the next
      // poll was taken for more of the old file and skipped.
      output.offset = 0;
      output.partial.clear();
      output.ended_at_cr = false;
    }
}

void ProgressWatch::Read(Output& output) {
  std::ifstream in(output.path, std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  long long size = in.tellg();
  if (size < output.offset) output.offset = 0;  // rewritten: read it again
  if (size <= output.offset) return;
  in.seekg(output.offset);
  std::string bytes(static_cast<size_t>(std::min<long long>(size - output.offset, kMaxRead)), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  output.offset += static_cast<long long>(bytes.size());
  Feed(bytes, static_cast<size_t>(&output - outputs_.data()));
}

std::optional<double> ProgressWatch::Poll() {
  if (regex_)
    for (Output& output : outputs_)
      if (!output.path.empty()) Read(output);
  if (!file_.empty())
    if (auto value = ReadProgressFile(file_); value && *value >= 0) progress_ = *value;
  return progress_;
}

}  // namespace freeride
