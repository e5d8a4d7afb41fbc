// `freeride profile TRACE...`: the bubbles of a pipeline-parallel training
// run, read from its PyTorch profiler traces (one per rank).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "base/files.h"
#include "cli/commands.h"
#include "profile/bubble_profile.h"
#include "profile/profile_report.h"

namespace freeride::cli {
namespace {

struct ProfileArgs {
  std::vector<std::string> traces;
  bool json = false;
  bool csv = false;
  std::string svg;
  profile::ProfileOptions options;
};

int RunProfile(const ProfileArgs& args) {
  using profile::TraceError;
  if (std::string input = InputOverwrittenBy(args.svg, args.traces); !input.empty()) {
    fmt::print(stderr, "freeride profile: --svg {} is the trace {}; write the picture elsewhere\n", args.svg, input);
    return 2;
  }
  std::vector<profile::KinetoTrace> traces(args.traces.size());
  std::vector<profile::RankProfile> ranks(args.traces.size());
  try {
    // One thread per trace: each is read and analysed independently.
    std::vector<std::future<void>> jobs;
    for (size_t i = 0; i < args.traces.size(); ++i) {
      std::error_code ec;
      auto size = std::filesystem::file_size(args.traces[i], ec);
      if (!ec && size > (uint64_t{256} << 20))
        fmt::print(stderr, "reading {} ({} MiB)...\n", args.traces[i], size >> 20);
      jobs.push_back(std::async(std::launch::async, [&, i] {
        traces[i] = profile::LoadKinetoTrace(args.traces[i]);
        ranks[i] = profile::AnalyzeRank(traces[i], static_cast<int>(i), args.options);
        // The per-op list is no longer needed; free it before the next step.
        std::vector<profile::GpuOp>().swap(traces[i].gpu_ops);
      }));
    }
    std::string first_error;
    for (size_t i = 0; i < jobs.size(); ++i) {
      try {
        jobs[i].get();
      } catch (const TraceError& e) {
        if (first_error.empty()) first_error = e.what();
      }
      // Before any error: a trace of skipped events is what explains one
      // that turns out to have none left.
      if (std::string skipped = profile::SkippedEventsMessage(traces[i]); !skipped.empty())
        fmt::print(stderr, "freeride profile: warning: {}\n", skipped);
    }
    if (!first_error.empty()) throw TraceError(first_error);
    profile::CheckSameRun(traces, ranks);
  } catch (const TraceError& e) {
    fmt::print(stderr, "freeride profile: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "freeride profile: out of memory reading the traces\n");
    return 2;
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (!args.svg.empty()) {
    std::ofstream out(args.svg);
    out << profile::RenderProfileSvg(ranks);
    if (!out.flush()) {
      fmt::print(stderr, "freeride profile: cannot write {}\n", args.svg);
      return 2;
    }
  }
  if (args.json)
    fmt::print("{}\n", profile::ProfileToJson(ranks, args.options.min_bubble_ms).dump(2));
  else if (args.csv)
    fmt::print("{}", profile::ProfileToCsv(ranks));
  else
    fmt::print("{}", profile::FormatProfileTable(ranks, args.options.min_bubble_ms));
  if (!args.svg.empty() && !args.json && !args.csv)
    fmt::print("timeline picture written to {}\n", args.svg);
  // Gaps that form no slots are an answer, not an input error: the figures
  // above stand, but no bubble list does.
  int unmatched = 0;
  for (const profile::RankProfile& r : ranks)
    if (!r.slots_conflict.empty()) {
      fmt::print(stderr, "freeride profile: rank {}: {}\n", r.rank, r.slots_conflict);
      ++unmatched;
    }
  return unmatched ? 3 : 0;
}

}  // namespace

void AddProfileCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Find the bubbles in PyTorch profiler (Kineto) traces, one trace per pipeline rank.");
  cmd->add_option("traces", args->traces, "Trace files (.json or .json.gz)")
      ->required()
      ->check(CLI::ExistingFile);
  auto* json = cmd->add_flag("--json", args->json, "Print JSON (stable keys; see docs/profile.md)");
  cmd->add_flag("--csv", args->csv, "Print CSV, one row per rank and bubble slot")->excludes(json);
  cmd->add_option("--svg", args->svg, "Also write a timeline picture to this SVG file");
  cmd->add_option("--min-bubble-ms", args->options.min_bubble_ms,
                  "Gaps shorter than this are idle time but not bubbles")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--all-streams", args->options.all_streams,
                "Count kernels on every stream as busy, not only the compute stream");
  cmd->callback([args, exit_code] { *exit_code = RunProfile(*args); });
}

}  // namespace freeride::cli
