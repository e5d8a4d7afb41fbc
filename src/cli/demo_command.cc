// `freeride demo`: finds its parts relative to this executable (a build tree
// or a bundle) and runs the demo driver, python/freeride/demo.py, with them.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <filesystem>

#include "cli/commands.h"

namespace freeride::cli {
namespace {

namespace fs = std::filesystem;

struct DemoParts {
  fs::path share;                 // holds python/ and examples/
  std::vector<fs::path> bin_dirs; // freeride, the built-in tasks, example_stage_replay
  std::string python;
};

// The bundle keeps python/ and examples/ in share/freeride; a build tree is
// a folder of the source tree, with the built-in tasks in tasks/.
std::optional<DemoParts> FindDemoParts(std::string* error) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    *error = "cannot find this executable (/proc/self/exe)";
    return std::nullopt;
  }
  fs::path dir = exe.parent_path();
  DemoParts parts;
  const fs::path driver = fs::path("python") / "freeride" / "demo.py";
  if (fs::exists(dir.parent_path() / "share" / "freeride" / driver)) {
    parts.share = dir.parent_path() / "share" / "freeride";
    parts.bin_dirs = {dir};
  } else if (fs::exists(dir.parent_path() / driver)) {
    parts.share = dir.parent_path();
    parts.bin_dirs = {dir, dir / "tasks"};
  } else {
    *error = fmt::format("cannot find the demo's files next to {} (looked for {} and {})",
                         exe.string(), (dir.parent_path() / "share" / "freeride" / driver).string(),
                         (dir.parent_path() / driver).string());
    return std::nullopt;
  }
  if (const char* python = std::getenv("FREERIDE_PYTHON"); python && *python) {
    parts.python = python;
  } else if (fs::exists(parts.share / ".venv" / "bin" / "python")) {
    parts.python = (parts.share / ".venv" / "bin" / "python").string();  // scripts/python-env.sh
  } else {
    parts.python = "python3";
  }
  return parts;
}

int RunDemo(const std::vector<std::string>& args) {
  std::string error;
  auto parts = FindDemoParts(&error);
  if (!parts) {
    fmt::print(stderr, "freeride demo: {}\n", error);
    return 2;
  }
  std::string path;
  for (const fs::path& d : parts->bin_dirs) path += d.string() + ":";
  if (const char* old = std::getenv("PATH")) path += old;
  setenv("PATH", path.c_str(), 1);
  setenv("FREERIDE_SHARE", parts->share.c_str(), 1);
  std::string pythonpath = (parts->share / "python").string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  std::vector<std::string> argv = {parts->python, "-u", "-m", "freeride.demo"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  fmt::print(stderr, "freeride demo: cannot run {}: {} (set FREERIDE_PYTHON to a Python 3)\n",
             parts->python, std::strerror(errno));
  return 2;
}

}  // namespace

void AddDemoCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "demo", "Run a short real session and show the report: GPUs if present, else CPU mode "
              "(freeride demo --help for options).");
  cmd->set_help_flag();  // --help goes to the demo driver
  cmd->allow_extras();
  cmd->prefix_command();
  cmd->callback([cmd, exit_code] { *exit_code = RunDemo(cmd->remaining()); });
}

}  // namespace freeride::cli
