#include "cli/install_layout.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

namespace freeride::cli {

namespace fs = std::filesystem;

std::optional<InstallLayout> FindInstallLayout(const fs::path& exe_dir, std::string* error) {
  const fs::path driver = fs::path("python") / "freeride" / "demo.py";
  std::error_code ec;
  fs::path installed = exe_dir.parent_path() / "share" / "freeride";
  if (fs::exists(installed / driver, ec))
    return InstallLayout{LayoutKind::kInstall, installed, installed / "python", {exe_dir}};
  // A wheel: the executables in the package's own _bin folder.
  fs::path package = exe_dir.parent_path();
  if (exe_dir.filename() == kWheelBinDir && fs::exists(package / "demo.py", ec))
    return InstallLayout{LayoutKind::kWheel, package / kWheelShareDir, package.parent_path(),
                         {exe_dir}};
  fs::path marker = exe_dir / kBuildTreeMarker;
  std::ifstream in(marker);
  std::string source;
  if (in && std::getline(in, source) && !source.empty()) {
    if (fs::exists(fs::path(source) / driver, ec))
      return InstallLayout{LayoutKind::kBuildTree, source, fs::path(source) / "python",
                           {exe_dir, exe_dir / "tasks"}};
    *error = fmt::format("the build tree {} was configured from {}, which has no {} any more",
                         exe_dir.string(), source, driver.string());
    return std::nullopt;
  }
  *error = fmt::format("cannot find FreeRide's files for {}: neither {} (an install or a bundle), "
                       "nor {} (a wheel), nor {} (a build tree) is there",
                       exe_dir.string(), (installed / driver).string(),
                       (exe_dir.parent_path() / "demo.py").string(), marker.string());
  return std::nullopt;
}

fs::path ExecutableDir(std::string* error) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    *error = "cannot find this executable (/proc/self/exe): " + ec.message();
    return {};
  }
  return exe.parent_path();
}

std::string ChoosePython(const InstallLayout& layout) {
  if (const char* python = std::getenv("FREERIDE_PYTHON"); python && *python) return python;
  std::error_code ec;
  fs::path venv = layout.share / ".venv" / "bin" / "python";
  if (fs::exists(venv, ec)) return venv.string();
  return "python3";
}

}  // namespace freeride::cli
