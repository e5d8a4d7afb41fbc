// `freeride`: one binary, many subcommands.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"

int main(int argc, char** argv) {
  CLI::App app{
      "FreeRide: run side tasks in the idle time (bubbles) of pipeline-parallel training."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("freeride ") + FREERIDE_VERSION);
  int exit_code = 0;
  freeride::cli::AddDaemonCommand(app, &exit_code);
  freeride::cli::AddClientCommands(app, &exit_code);
  freeride::cli::AddScheduleCommand(app, &exit_code);
  freeride::cli::AddProfileCommand(app, &exit_code);
  freeride::cli::AddTaskProfileCommand(app, &exit_code);
  freeride::cli::AddReportCommands(app, &exit_code);
  freeride::cli::AddSimulateCommand(app, &exit_code);
  freeride::cli::AddDemoCommand(app, &exit_code);
  freeride::cli::AddDoctorCommand(app, &exit_code);
  freeride::cli::RefuseEmptyValues(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
