#include "daemon/progress_watch.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace freeride {

namespace {

constexpr size_t kMaxRead = 1 << 20;  // per poll: a chatty program is read over several

std::optional<double> LastNumber(const std::string& text) {
  std::optional<double> last;
  const char* p = text.c_str();
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

}  // namespace

std::string ProgressWatch::Check(const std::string& regex) {
  try {
    std::regex compiled(regex, std::regex::ECMAScript);
    if (compiled.mark_count() > 1)
      return "the progress regex has more than one capture group: give it one (the progress so "
             "far) or none (each matching line counts one)";
  } catch (const std::regex_error& e) {
    return std::string("the progress regex does not compile: ") + e.what();
  }
  return "";
}

ProgressWatch::ProgressWatch(const std::string& regex, std::string stdout_path, std::string file)
    : stdout_path_(std::move(stdout_path)), file_(std::move(file)) {
  if (!regex.empty() && Check(regex).empty()) {
    regex_.emplace(regex, std::regex::ECMAScript);
    counted_ = regex_->mark_count() == 0;
  }
}

void ProgressWatch::Feed(std::string_view bytes) {
  partial_.append(bytes);
  size_t start = 0, newline;
  while ((newline = partial_.find('\n', start)) != std::string::npos) {
    std::string line = partial_.substr(start, newline - start);
    start = newline + 1;
    std::smatch match;
    if (!regex_ || !std::regex_search(line, match, *regex_)) continue;
    if (counted_) {
      progress_ = progress_.value_or(0) + 1;
    } else if (auto value = LastNumber(match[1].str())) {
      progress_ = *value;
    }
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxRead) partial_.clear();  // a line without end: not a progress line
}

std::optional<double> ProgressWatch::Poll() {
  if (regex_ && !stdout_path_.empty()) {
    std::ifstream in(stdout_path_, std::ios::binary);
    if (in) {
      in.seekg(0, std::ios::end);
      long long size = in.tellg();
      if (size < offset_) offset_ = 0;  // rewritten: read it again
      if (size > offset_) {
        in.seekg(offset_);
        std::string bytes(static_cast<size_t>(std::min<long long>(size - offset_, kMaxRead)), '\0');
        in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        bytes.resize(static_cast<size_t>(in.gcount()));
        offset_ += static_cast<long long>(bytes.size());
        Feed(bytes);
      }
    }
  }
  if (!file_.empty()) {
    std::ifstream in(file_);
    if (in) {
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.size() <= 4096)
        if (auto value = LastNumber(text); value && *value >= 0) progress_ = *value;
    }
  }
  return progress_;
}

}  // namespace freeride
