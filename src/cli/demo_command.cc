// `freeride demo`: finds its parts relative to this executable (a build tree,
// an install, a bundle or a wheel: cli/install_layout.h) and runs the demo driver,
// python/freeride/demo.py, with them.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <filesystem>

#include "cli/commands.h"
#include "cli/install_layout.h"

namespace freeride::cli {
namespace {

int RunDemo(const std::vector<std::string>& args) {
  std::string error;
  std::optional<InstallLayout> parts;
  if (std::filesystem::path dir = ExecutableDir(&error); !dir.empty())
    parts = FindInstallLayout(dir, &error);
  if (!parts) {
    fmt::print(stderr, "freeride demo: {}\n", error);
    return 2;
  }
  std::string python = ChoosePython(*parts);
  std::string path;
  for (const std::filesystem::path& d : parts->bin_dirs) path += d.string() + ":";
  if (const char* old = std::getenv("PATH")) path += old;
  setenv("PATH", path.c_str(), 1);
  setenv("FREERIDE_SHARE", parts->share.c_str(), 1);
  std::string pythonpath = parts->python_path.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath += std::string(":") + old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  std::vector<std::string> argv = {python, "-u", "-m", "freeride.demo"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  fmt::print(stderr, "freeride demo: cannot run {}: {} (set FREERIDE_PYTHON to a Python 3)\n",
             python, std::strerror(errno));
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
