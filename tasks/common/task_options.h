// Command-line options every built-in task takes.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "freeride/task.h"

namespace freeride::tasks {

struct CommonTaskOptions {
  std::string device = "auto";  // cpu, cuda or auto
  double step_ms = 2;           // time budget of one step
  bool fixed_steps = false;     // steps of step_ms even behind a GPU gate (common/bubble_windows.h)
};

inline void AddCommonTaskOptions(CLI::App& app, CommonTaskOptions* o) {
  app.add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--step-ms", o->step_ms, "Time budget of one step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--fixed-steps", o->fixed_steps,
               "Steps of --step-ms even when stepping alone behind a lane's GPU gate (by default such "
               "a task tries a third of the lane's median admission window, 0.5 ms at least, against "
               "--step-ms where it is a fifth or more shorter, and keeps the one that does more work "
               "a bubble)");
}

// The main() of a built-in task, after it has declared its own options on
// `app`: takes the SDK's --standalone and --seconds, adds the common
// options, parses (0 after --help, 2 after a usage error, with CLI11's
// message), refuses a run with no input (`has_input(options)` false: prints
// `missing_input`, status 2), and runs Task(options).
template <typename Task, typename Options, typename HasInput>
int RunTaskMain(CLI::App& app, Options& options, int argc, char** argv, HasInput has_input,
                const char* missing_input) {
  RunOptions run = ParseRunOptions(&argc, argv);
  AddCommonTaskOptions(app, &options.common);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!has_input(options)) {
    std::fprintf(stderr, "%s\n", missing_input);
    return 2;
  }
  Task task(options);
  return RunIterativeTask(task, run);
}

}  // namespace freeride::tasks
