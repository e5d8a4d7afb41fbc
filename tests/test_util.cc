#include "test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/files.h"

namespace freeride {

TempDir::TempDir() {
  char pattern[] = "/tmp/frt-XXXXXX";
  char* made = mkdtemp(pattern);
  if (!made) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "bad JSON line in " << path << ": " << line;
    }
  }
  return out;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie still answers kill(); look at its state.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  std::getline(stat, content);
  size_t close = content.rfind(')');
  return close == std::string::npos || content.size() < close + 2 || content[close + 2] != 'Z';
}

std::string FileText(const std::string& path) { return ReadWholeFile(path).value_or(""); }

ShellResult RunShell(const std::string& command, const std::string& dir) {
  int status = std::system((command + " > " + dir + "/shell.out 2> " + dir + "/shell.err").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          FileText(dir + "/shell.out"), FileText(dir + "/shell.err")};
}

}  // namespace freeride
