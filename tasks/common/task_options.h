// Command-line options every built-in task takes.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace freeride::tasks {

struct CommonTaskOptions {
  std::string device = "auto";  // cpu, cuda or auto
  double step_ms = 2;           // time budget of one step
};

inline void AddCommonTaskOptions(CLI::App& app, CommonTaskOptions* o) {
  app.add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--step-ms", o->step_ms, "Time budget of one step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

// Parses the command line.  Returns -1 to go on, else the exit status: 0
// after --help, 2 after a usage error (printed with CLI11's message), the
// status every built-in task uses for bad arguments.
inline int ParseTaskArguments(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
}

}  // namespace freeride::tasks
