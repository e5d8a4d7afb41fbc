// Where the `freeride` executable's companions are: the Python package, the
// examples (the "share" folder) and the folders of the built-in tasks and
// examples.  Found from the executable's own folder, so that a build tree in
// any directory, a `cmake --install` prefix, a bundle and a pip-installed
// wheel all work.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace freeride::cli {

enum class LayoutKind {
  kInstall,    // PREFIX/bin/freeride with PREFIX/share/freeride (an install or a bundle)
  kBuildTree,  // BUILD/freeride with BUILD/freeride-build-tree.txt naming the source tree
  kWheel,      // SITE/freeride/_bin/freeride, beside the package it came in (scripts/wheel.sh)
};

struct InstallLayout {
  LayoutKind kind = LayoutKind::kInstall;
  std::filesystem::path share;                  // holds examples/
  std::filesystem::path python_path;            // holds the freeride package: for PYTHONPATH
  std::vector<std::filesystem::path> bin_dirs;  // freeride, the built-in tasks, the examples
};

// The folders of a wheel's package that hold the executables and the
// examples (scripts/wheel.sh makes them).
inline constexpr char kWheelBinDir[] = "_bin";
inline constexpr char kWheelShareDir[] = "_share";

// The file CMake writes at the top of a build tree; its first line is the
// source tree's path.
inline constexpr char kBuildTreeMarker[] = "freeride-build-tree.txt";

// The layout around exe_dir, the folder of the freeride executable; nullopt
// and *error (saying where it looked) when neither layout is there.
// Any thread.
std::optional<InstallLayout> FindInstallLayout(const std::filesystem::path& exe_dir,
                                               std::string* error);

// The folder of the running executable (from /proc/self/exe); empty and
// *error when it cannot be read.
std::filesystem::path ExecutableDir(std::string* error);

// The Python for the demo and the doctor: $FREERIDE_PYTHON (the wheel's
// `freeride` entry point sets it to the Python it was installed for), else
// a .venv in the share folder (scripts/python-env.sh makes one in the
// source tree), else "python3" from PATH.
std::string ChoosePython(const InstallLayout& layout);

}  // namespace freeride::cli
