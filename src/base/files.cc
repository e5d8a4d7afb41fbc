#include "base/files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace freeride {

bool ReplaceFileAtomically(const std::string& path,
                           const std::function<bool(const std::string& tmp_path)>& write,
                           std::string* error) {
  std::string tmp = path + ".tmp";
  if (!write(tmp)) {
    if (error) *error = tmp + ": cannot write";
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error) {
  return ReplaceFileAtomically(
      path,
      [&](const std::string& tmp) {
        std::ofstream out(tmp, std::ios::binary);
        out.write(content.data(), static_cast<std::streamsize>(content.size()));
        out.close();
        return static_cast<bool>(out);
      },
      error);
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::optional<std::string> ReadInputFile(const std::string& path, size_t max_bytes, std::string* error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *error = fmt::format("{}: is a directory, not a file", path);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = fmt::format("{}: cannot open it ({})", path, std::strerror(errno));
    return std::nullopt;
  }
  std::string content;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    content.append(chunk, static_cast<size_t>(in.gcount()));
    if (content.size() > max_bytes) {
      *error = fmt::format("{}: larger than {} MiB, more than any such file has", path, max_bytes >> 20);
      return std::nullopt;
    }
  }
  if (in.bad()) {
    *error = fmt::format("{}: error while reading it", path);
    return std::nullopt;
  }
  return content;
}

std::string InputOverwrittenBy(const std::string& output, const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (output.empty() || !std::filesystem::exists(output, ec)) return "";
  for (const std::string& input : inputs)
    if (std::filesystem::equivalent(output, input, ec) && !ec) return input;
  return "";
}

std::string RotatedFilePath(const std::string& path, int index) {
  return path + "." + std::to_string(index);
}

std::vector<std::string> RotatedFilesOldestFirst(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  for (int i = 1; std::filesystem::exists(RotatedFilePath(path, i), ec); ++i)
    files.push_back(RotatedFilePath(path, i));
  std::reverse(files.begin(), files.end());
  if (std::filesystem::exists(path, ec)) files.push_back(path);
  return files;
}

}  // namespace freeride
