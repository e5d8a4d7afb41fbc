// `freeride report EVENTS` and `freeride timeline EVENTS`: what a run did,
// read from the daemon's event log (STATE_DIR/events.jsonl); `freeride report --servers`
// asks several nodes' daemons instead (cli/cluster_commands.h).
#include <fmt/format.h>

#include <filesystem>

#include "base/files.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "report/event_log_reader.h"
#include "report/repeated_records.h"
#include "report/run_report.h"
#include "report/timeline.h"

namespace freeride::cli {
namespace {

// An events argument may name the log or the daemon's state directory.
std::string EventLogPath(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::is_directory(arg, ec)) return (std::filesystem::path(arg) / "events.jsonl").string();
  return arg;
}

std::optional<report::EventLogData> LoadLog(const char* command, const std::string& arg) {
  std::string error;
  auto log = report::ReadEventLog(EventLogPath(arg), &error);
  if (!log) fmt::print(stderr, "freeride {}: {}\n", command, error);
  // Said on stderr too: a report's own note is in its text, and a timeline
  // has none.
  else if (std::string dropped = report::DroppedRecordsMessage(*log); !dropped.empty())
    fmt::print(stderr, "freeride {}: warning: {}\n", command, dropped);
  return log;
}

struct ReportArgs {
  std::string events;
  ClusterRequest cluster;  // --servers/--cluster: the nodes' daemons instead of a log
  std::string baseline;
  std::string alone_rates;
  double gpu_hour_price = 0;
  bool json = false;
};

int RunReport(const ReportArgs& args) {
  if (args.cluster.Requested()) {
    if (!args.events.empty() || !args.baseline.empty() || !args.alone_rates.empty()) {
      fmt::print(stderr, "freeride report: --servers/--cluster ask the nodes' daemons; an event "
                         "log, --baseline and --alone-rates go without them\n");
      return 2;
    }
    ClusterRequest request = args.cluster;
    request.json = args.json;
    return RunClusterView(request, ClusterDetail::kReport, "report");
  }
  if (args.events.empty()) {
    fmt::print(stderr, "freeride report: give an event log (or state directory), or the nodes "
                       "with --servers/--cluster\n");
    return 2;
  }
  auto run = LoadLog("report", args.events);
  if (!run) return 2;
  std::optional<report::EventLogData> baseline;
  if (!args.baseline.empty()) {
    baseline = LoadLog("report", args.baseline);
    if (!baseline) return 2;
  }
  report::ReportOptions options;
  options.gpu_hour_price = args.gpu_hour_price;
  if (!args.alone_rates.empty()) {
    std::string error;
    auto rates = report::ReadAloneRates(args.alone_rates, &error);
    if (!rates) {
      fmt::print(stderr, "freeride report: {}\n", error);
      return 2;
    }
    options.alone_rates = *rates;
  }
  if (run->lines == 0) {
    fmt::print(stderr, "freeride report: {} has no events\n", run->path);
    return 2;
  }
  report::RunReport r = report::ComputeRunReport(*run, baseline ? &*baseline : nullptr, options);
  fmt::print("{}", args.json ? report::RunReportToJson(r) : report::FormatRunReport(r));
  return 0;
}

struct TimelineArgs {
  std::string events;
  std::string perfetto;
  std::string svg;
  report::SvgWindow window;
};

bool Write(const std::string& path, const std::string& content, const char* what) {
  std::string error;
  if (!WriteFileAtomically(path, content, &error)) {
    fmt::print(stderr, "freeride timeline: {}\n", error);
    return false;
  }
  fmt::print("{} written to {}\n", what, path);
  return true;
}

int RunTimeline(const TimelineArgs& args) {
  if (args.perfetto.empty() && args.svg.empty()) {
    fmt::print(stderr, "freeride timeline: nothing to write; give --perfetto FILE and/or --svg FILE\n");
    return 2;
  }
  // Checked before anything is written: `--perfetto LOG` replaced the log.
  std::vector<std::string> inputs = RotatedFilesOldestFirst(EventLogPath(args.events));
  for (const std::string* output : {&args.perfetto, &args.svg}) {
    if (std::string input = InputOverwrittenBy(*output, inputs); !input.empty()) {
      fmt::print(stderr, "freeride timeline: {} is the event log {} read; write the picture elsewhere\n",
                 *output, input);
      return 2;
    }
  }
  auto log = LoadLog("timeline", args.events);
  if (!log) return 2;
  if (log->bubbles.empty() && log->steps.empty()) {
    fmt::print(stderr, "freeride timeline: {} has no bubble or step events to draw\n", log->path);
    return 2;
  }
  if (!args.perfetto.empty() &&
      !Write(args.perfetto, report::RenderPerfettoTrace(*log), "Perfetto trace (open in ui.perfetto.dev)"))
    return 2;
  if (!args.svg.empty() && !Write(args.svg, report::RenderTimelineSvg(*log, args.window), "SVG timeline"))
    return 2;
  return 0;
}

}  // namespace

void AddReportCommands(CLI::App& app, int* exit_code) {
  auto report = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Idle time, what side tasks used of it, the training's slowdown and the saving, "
                "from an event log; with --servers, the cumulative figures of several nodes' daemons.");
  cmd->add_option("events", report->events, "The daemon's events.jsonl, or its state directory");
  AddClusterOptions(cmd, &report->cluster);
  cmd->add_option("--token-file", report->cluster.token_file,
                  "With --servers/--cluster: the daemons' token (a read-only one is enough)");
  cmd->add_option("--tls-ca", report->cluster.tls_ca,
                  "With --servers/--cluster: use TLS, trusting this CA certificate");
  cmd->add_option("--baseline", report->baseline,
                  "Event log of the same training without side tasks, for the overhead");
  cmd->add_option("--alone-rates", report->alone_rates,
                  "JSON: task name -> units/s on a dedicated GPU (or a task-profile object)");
  cmd->add_option("--gpu-hour-price", report->gpu_hour_price, "Price of one GPU-hour, for money figures")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", report->json, "Print JSON");
  cmd->callback([report, exit_code] { *exit_code = RunReport(*report); });

  auto timeline = std::make_shared<TimelineArgs>();
  cmd = app.add_subcommand("timeline", "Draw a run from its event log: a Perfetto trace and an SVG.");
  cmd->add_option("events", timeline->events, "The daemon's events.jsonl, or its state directory")
      ->required();
  cmd->add_option("--perfetto", timeline->perfetto, "Write a Perfetto/Chrome trace JSON here");
  cmd->add_option("--svg", timeline->svg, "Write an SVG of a few iterations here");
  cmd->add_option("--iterations", timeline->window.iterations, "Iterations in the SVG")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--from-iteration", timeline->window.first_iteration,
                  "First iteration in the SVG (default: the middle of the run)");
  cmd->callback([timeline, exit_code] { *exit_code = RunTimeline(*timeline); });
}

}  // namespace freeride::cli
