// Subcommands of the `freeride` CLI.  Each Add* registers one subcommand on
// the app; the callback runs it and sets the process exit status.
#pragma once
#include <CLI/CLI.hpp>

namespace freeride::cli {

void AddDaemonCommand(CLI::App& app, int* exit_code);
void AddClientCommands(CLI::App& app, int* exit_code);
void AddScheduleCommand(CLI::App& app, int* exit_code);
void AddProfileCommand(CLI::App& app, int* exit_code);
void AddTaskProfileCommand(CLI::App& app, int* exit_code);
void AddReportCommands(CLI::App& app, int* exit_code);
void AddDemoCommand(CLI::App& app, int* exit_code);
void AddSimulateCommand(CLI::App& app, int* exit_code);
void AddDoctorCommand(CLI::App& app, int* exit_code);

}  // namespace freeride::cli
