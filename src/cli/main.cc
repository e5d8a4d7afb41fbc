// `freeride`: one binary, many subcommands.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "base/say.h"
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
    // CLI11 prints the message; --help and --version are successes, and
    // every usage error is status 2, as the docs and other tools say (CLI11's
    // own codes, 104 for a bad number or 106 for a missing argument, tell a
    // script nothing more).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    // Said, not an abort and a core file: the commands refuse the inputs they
    // know to be too large, but a machine may have less memory than they allow.
    freeride::Say(stderr, "freeride: out of memory: give smaller inputs, or run where there is more\n");
    return 1;
  } catch (const std::exception& e) {
    // fmt::print throws once stdio meets a failed write (output larger than
    // its buffer, to a full disk): that is the output's failure, status 1.
    if (std::ferror(stdout)) {
      freeride::Say(stderr, "freeride: cannot write the output: {}\n", e.what());
      return 1;
    }
    freeride::Say(stderr, "freeride: internal error: {}\n", e.what());
    return 3;
  }
  // Output that never reached its file (a full disk, a closed pipe) is an
  // error, not a success with a cut table or JSON.
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed || std::ferror(stdout)) {
    // The reason is known when this flush failed; an earlier write's is gone.
    const int error = errno;
    freeride::Say(stderr, "freeride: cannot write the output: {}\n",
                  !flushed && error != 0 ? std::strerror(error) : "a write failed");
    return exit_code != 0 ? exit_code : 1;
  }
  return exit_code;
}
