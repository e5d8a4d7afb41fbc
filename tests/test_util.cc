#include "test_util.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
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
    // A last line with no newline yet is being written (tests read the
    // daemon's live event log): it is read at the next look, not now.
    if (in.eof()) break;
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

void ExecSql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* message = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
      << (message ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

void OverwriteBytes(const std::string& path, uint64_t offset, size_t length) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file) << path;
  file.seekp(static_cast<std::streamoff>(offset));
  std::string garbage(length, '\x5a');
  file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  ASSERT_TRUE(file) << path;
}

}  // namespace freeride
