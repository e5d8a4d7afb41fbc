// Helpers shared by the tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace freeride {

// A fresh directory under /tmp, removed with its contents on destruction.
// Short, because Unix socket paths are limited to 107 characters.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every complete JSON line of a file (lines that do not parse fail the
// test; a last line with no newline yet, still being written, is left out).
std::vector<nlohmann::json> ReadJsonLines(const std::string& path);

bool ProcessAlive(int pid);

// A file's whole content ("" when it cannot be read).
std::string FileText(const std::string& path);

struct ShellResult {
  int status;       // exit status
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command, its output captured through files in `dir`.
ShellResult RunShell(const std::string& command, const std::string& dir);

// Runs SQL on an SQLite database through a connection of its own, as
// another process could (a failure fails the test).
void ExecSql(const std::string& db_path, const std::string& sql);

// Overwrites `length` bytes of a file at `offset` with garbage.
void OverwriteBytes(const std::string& path, uint64_t offset, size_t length);

}  // namespace freeride
