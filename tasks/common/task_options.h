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

}  // namespace freeride::tasks
