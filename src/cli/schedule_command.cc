// `freeride schedule`: each rank's action timeline, its idle slots and the
// bubble fraction of a pipeline schedule.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <new>
#include <optional>
#include <stdexcept>

#include "cli/commands.h"
#include "schedule/pipeline_schedule.h"

namespace freeride::cli {
namespace {

struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 4;
  int microbatches = 4;
  std::string times = "1,2";
  double p2p = 0;
  int virtual_stages = 0;  // the schedule's default unless virtual_given
  bool virtual_given = false;
  bool steady = false;
  bool json = false;
};

int RunSchedule(const ScheduleArgs& args) {
  std::string error;
  auto kind = ParseScheduleKind(args.schedule, &error);
  if (!kind) {
    fmt::print(stderr, "freeride schedule: {}\n", error);
    return 2;
  }
  StageTimes times;
  if (!ParseStageTimes(args.times, &times, &error)) {
    fmt::print(stderr, "freeride schedule: {}\n", error);
    return 2;
  }
  if (!std::isfinite(args.p2p) || args.p2p < 0) {
    fmt::print(stderr, "freeride schedule: --p2p {}: give a latency of 0 or more, in the unit of --times\n",
               args.p2p);
    return 2;
  }
  if (args.virtual_given && args.virtual_stages < 1) {
    fmt::print(stderr, "freeride schedule: --virtual {}: give 1 or more stages per rank (or leave it out: "
                       "{} for {})\n", args.virtual_stages, DefaultVirtualStages(*kind), ScheduleKindName(*kind));
    return 2;
  }
  times.p2p_latency = args.p2p;
  int virtual_stages = args.virtual_given ? args.virtual_stages : DefaultVirtualStages(*kind);
  ScheduleTimeline t;
  try {
    t = args.steady ? TimeSteadyState(*kind, args.stages, args.microbatches, times, 1e-9,
                                      virtual_stages)
                    : TimeSchedule(*kind, args.stages, args.microbatches, times, 1e-9, virtual_stages);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "freeride schedule: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "freeride schedule: the schedule does not fit in this machine's memory: give fewer "
                       "stages or micro-batches\n");
    return 2;
  } catch (const std::logic_error& e) {  // the timer's own check (a deadlock): a bug, said as one
    fmt::print(stderr, "freeride schedule: internal error: {}\n", e.what());
    return 3;
  }
  if (!std::isfinite(t.iteration) || !std::isfinite(t.bubble_fraction)) {
    fmt::print(stderr, "freeride schedule: the iteration's time overflows (--times {}, --p2p {}): give "
                       "smaller times\n", args.times, args.p2p);
    return 2;
  }
  // GPipe/1F1B: (P-1)/(M+P-1).  Interleaving divides the bubble by V (the
  // Megatron paper's ideal); ZB-V has no closed form.
  std::optional<double> ideal;
  if (*kind == ScheduleKind::kGPipe || *kind == ScheduleKind::k1F1B)
    ideal = ClosedFormBubbleFraction(args.stages, args.microbatches);
  else if (*kind == ScheduleKind::kInterleaved1F1B)
    ideal = static_cast<double>(args.stages - 1) /
            (virtual_stages * args.microbatches + args.stages - 1);
  if (args.json) {
    nlohmann::json out;
    out["schedule"] = ScheduleKindName(*kind);
    out["stages"] = args.stages;
    out["microbatches"] = args.microbatches;
    out["virtual_stages"] = virtual_stages;
    out["steady_state"] = args.steady;
    out["iteration"] = t.iteration;
    out["bubble_fraction"] = t.bubble_fraction;
    out["closed_form_bubble_fraction"] = ideal ? nlohmann::json(*ideal) : nlohmann::json();
    // The ranks are written one at a time into the document's place for
    // them: a document built whole took 14 times the text's memory (5.8 GB
    // for 64 stages x 60,000 micro-batches).
    constexpr const char* kRanksPlace = "\u0001ranks";
    out["ranks"] = kRanksPlace;
    const std::string document = out.dump(2);
    const std::string place = nlohmann::json(kRanksPlace).dump();
    const size_t at = document.find(place);
    fmt::print("{}[\n", std::string_view(document).substr(0, at));
    for (size_t i = 0; i < t.ranks.size(); ++i) {
      const RankTimeline& r = t.ranks[i];
      nlohmann::json rank{{"rank", r.rank}, {"busy", r.busy}};
      for (const TimedAction& a : r.actions)
        rank["actions"].push_back({{"action", a.action.Label()}, {"start", a.start}, {"end", a.end}});
      rank["idle"] = nlohmann::json::array();
      for (const IdleSlot& s : r.idle)
        rank["idle"].push_back({{"slot", s.slot},
                                {"start", s.start},
                                {"duration", s.duration},
                                {"type", BubbleTypeName(s.type)},
                                {"prototype_name", std::string(1, BubbleTypeLetter(s.type))}});
      // Indented as an element of the top object's array (4 spaces).
      const std::string text = rank.dump(2);
      rank = nullptr;
      std::string indented = "    ";
      indented.reserve(text.size() + text.size() / 4);
      for (char c : text) {
        indented += c;
        if (c == '\n') indented += "    ";
      }
      fmt::print("{}{}\n", indented, i + 1 < t.ranks.size() ? "," : "");
    }
    fmt::print("  ]{}\n", std::string_view(document).substr(at + place.size()));
    return 0;
  }
  // B is the whole backward; with W given (F,B,W) it is shown as I and W, as they were given.
  const std::string backward = times.weight >= 0 ? fmt::format("I={} W={}", times.InputTime(), times.WeightTime())
                                                 : fmt::format("B={}", times.backward);
  fmt::print("{} schedule, {} ranks x {} stage(s), {} micro-batches, F={} {} (time units)\n",
             ScheduleKindName(*kind), args.stages, virtual_stages, args.microbatches, times.forward, backward);
  if (args.steady)
    fmt::print("steady state of a training loop: times from each rank's own iteration start; "
               "the fill joins the previous iteration's drain\n");
  for (const RankTimeline& r : t.ranks) {
    std::string order;
    for (const TimedAction& a : r.actions) order += a.action.Label() + " ";
    fmt::print("\nrank {}: {}\n  idle:", r.rank, order);
    for (const IdleSlot& s : r.idle)
      fmt::print(" [{} {}@{:g}+{:g}]", BubbleTypeLetter(s.type), s.slot, s.start, s.duration);
    fmt::print("\n  idle {:.1f}% of {:g}\n", 100.0 * (t.iteration - r.busy) / t.iteration,
               t.iteration);
  }
  if (*kind == ScheduleKind::kInterleaved1F1B)
    fmt::print("\nbubble fraction {:.4f} (ideal (P-1)/(V*M+P-1) = {:.4f})\n", t.bubble_fraction,
               *ideal);
  else if (ideal)
    fmt::print("\nbubble fraction {:.4f} (closed form (P-1)/(M+P-1) = {:.4f})\n",
               t.bubble_fraction, *ideal);
  else
    fmt::print("\nbubble fraction {:.4f}\n", t.bubble_fraction);
  fmt::print("actions are <stage><F|B|I|W><micro-batch>, as torch's pipeline_order prints them\n");
  fmt::print("idle slot letters: A fill, B waiting after warm-up, D steady gap, C drain\n");
  return 0;
}

}  // namespace

void AddScheduleCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Model a pipeline schedule: per-rank actions, idle slots, bubble fraction.");
  cmd->add_option("--schedule", args->schedule, "gpipe, 1f1b, interleaved, loopedbfs, interleavedzb, zbv or dualpipev (or torch's class name)")
      ->capture_default_str();
  cmd->add_option("--stages", args->stages, "Pipeline ranks P")->capture_default_str();
  cmd->add_option("--virtual", args->virtual_stages,
                  "Stages per rank V (default 1 for gpipe and 1f1b, else 2)");
  cmd->add_option("--microbatches", args->microbatches, "Micro-batches M")->capture_default_str();
  cmd->add_option("--times", args->times,
                  "Times of one action on one stage: F,B or F,B,W (W: the weight-gradient "
                  "part, split out by interleavedzb, zbv and dualpipev)")
      ->capture_default_str();
  cmd->add_option("--p2p", args->p2p, "Send/receive latency between stages")->capture_default_str();
  cmd->add_flag("--steady", args->steady,
                "Time the steady state of a training loop (iterations back to back, as "
                "`freeride profile` sees them) instead of one iteration on its own");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code, cmd] {
    args->virtual_given = cmd->count("--virtual") > 0;
    *exit_code = RunSchedule(*args);
  });
}

}  // namespace freeride::cli
