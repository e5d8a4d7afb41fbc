#include "sim/stage_times_file.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "base/files.h"

namespace freeride::sim {
namespace {

// A finite non-negative number at `key`, or throws a message naming it.
double TimeAt(const nlohmann::json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    throw std::runtime_error(fmt::format("{} has no number \"{}\"", where, key));
  double value = it->get<double>();
  if (!std::isfinite(value) || value < 0)
    throw std::runtime_error(fmt::format("{}: \"{}\" is {}, not a time of 0 ms or more", where, key, value));
  return value;
}

StageTimesFile FromConfig(const nlohmann::json& doc) {
  const nlohmann::json& stages = doc["stages"];
  if (!stages.is_array() || stages.empty())
    throw std::runtime_error("\"stages\" must be a non-empty list of {\"forward_ms\", \"backward_ms\"}");
  StageTimesFile out;
  out.source = "config";
  for (size_t i = 0; i < stages.size(); ++i) {
    std::string where = fmt::format("stage {}", i);
    if (!stages[i].is_object()) throw std::runtime_error(where + " is not an object");
    StageTimes t;
    t.forward = TimeAt(stages[i], "forward_ms", where);
    t.backward = TimeAt(stages[i], "backward_ms", where);
    if (stages[i].contains("weight_ms")) t.weight = TimeAt(stages[i], "weight_ms", where);
    out.stages.push_back(t);
  }
  if (doc.contains("p2p_ms")) out.p2p_ms = TimeAt(doc, "p2p_ms", "the file");
  out.ranks = static_cast<int>(out.stages.size());
  out.note = fmt::format("{} stage times from a config", out.stages.size());
  return out;
}

StageTimesFile FromProfile(const nlohmann::json& doc, int microbatches, double backward_ratio) {
  const nlohmann::json& ranks = doc["ranks"];
  if (!ranks.is_array() || ranks.empty())
    throw std::runtime_error("\"ranks\" must be a non-empty list, as `freeride profile --json` writes");
  if (microbatches < 1)
    throw std::runtime_error("deriving stage times from a profile needs --microbatches (at least 1)");
  if (!(backward_ratio > 0 && std::isfinite(backward_ratio)))
    throw std::runtime_error("--backward-ratio must be above 0");
  StageTimesFile out;
  out.source = "profile";
  std::string listed;
  // Stages follow the ranks' "rank" (`freeride profile` writes each trace's
  // global rank, so one pipeline of a larger job is e.g. ranks 4..7, and a
  // merged or edited file need not list them in order); without one, the
  // list's order.
  std::vector<size_t> order(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) order[i] = i;
  bool numbered = false;
  for (size_t i = 0; i < ranks.size(); ++i)
    numbered = numbered || (ranks[i].is_object() && ranks[i].contains("rank"));
  if (numbered) {
    std::map<int64_t, size_t> by_rank;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const nlohmann::json* rank = ranks[i].is_object() && ranks[i].contains("rank") ? &ranks[i]["rank"] : nullptr;
      if (rank == nullptr || !rank->is_number_integer() || rank->get<int64_t>() < 0)
        throw std::runtime_error(fmt::format(
            "entry {} of \"ranks\" needs a \"rank\" (a whole number, 0 or more), as the others have one", i));
      auto [at, added] = by_rank.emplace(rank->get<int64_t>(), i);
      if (!added)
        throw std::runtime_error(
            fmt::format("rank {} is listed twice (entries {} and {})", at->first, at->second, i));
    }
    size_t stage = 0;
    for (const auto& [rank, i] : by_rank) order[stage++] = i;
  }
  for (size_t stage = 0; stage < ranks.size(); ++stage) {
    const size_t i = order[stage];
    // Named by its own "rank" where it has one (stage 0 of ranks 4..7 is
    // rank 4), else by its place in the list.
    const bool has_rank = ranks[i].is_object() && ranks[i].contains("rank");
    std::string where = has_rank ? fmt::format("rank {}", ranks[i]["rank"].get<int64_t>())
                                 : fmt::format("rank {}", stage);
    if (!ranks[i].is_object()) throw std::runtime_error(where + " is not an object");
    // Older bubble tables carry the iteration and its gaps but no busy time.
    double busy = 0;
    if (ranks[i].contains("busy_ms")) {
      busy = TimeAt(ranks[i], "busy_ms", where);
    } else {
      busy = TimeAt(ranks[i], "iteration_ms", where);
      const nlohmann::json& bubbles = ranks[i].contains("bubbles") ? ranks[i]["bubbles"] : nlohmann::json();
      if (!bubbles.is_array())
        throw std::runtime_error(where + " has neither \"busy_ms\" nor a list of \"bubbles\"");
      for (size_t b = 0; b < bubbles.size(); ++b)
        busy -= TimeAt(bubbles[b], "duration_ms", fmt::format("{} bubble {}", where, b));
    }
    if (busy <= 0) throw std::runtime_error(where + " was never busy: nothing to derive times from");
    StageTimes t;
    t.forward = busy / (microbatches * (1 + backward_ratio));
    t.backward = backward_ratio * t.forward;
    out.stages.push_back(t);
    listed += fmt::format("{}{:.2f}/{:.2f}", stage ? ", " : "", t.forward, t.backward);
  }
  out.ranks = static_cast<int>(out.stages.size());
  out.note = fmt::format(
      "forward/backward ms per rank from the profile's busy time, {} micro-batches, backward = "
      "{:g} x forward: {}",
      microbatches, backward_ratio, listed);
  return out;
}

// `freeride schedule --json` output: it has "stages" too (a count, not a
// list) and "ranks" (action timelines in --times' units, not measured ms),
// so it would be read as a broken config.
bool IsScheduleOutput(const nlohmann::json& doc) {
  return doc.contains("schedule") && doc["schedule"].is_string() && doc.contains("ranks") &&
         doc.contains("bubble_fraction") && !(doc.contains("stages") && doc["stages"].is_array());
}

// The flags that simulate the schedule a `freeride schedule --json` output
// describes, from the shape it gives; its times are not in it.
std::string FlagsOfSchedule(const nlohmann::json& doc) {
  std::string flags = "--schedule " + doc["schedule"].get<std::string>();
  auto add = [&](const char* key, const char* flag, int64_t unless) {
    auto it = doc.find(key);
    if (it != doc.end() && it->is_number_integer() && it->get<int64_t>() != unless)
      flags += fmt::format(" {} {}", flag, it->get<int64_t>());
  };
  add("stages", "--stages", -1);
  add("virtual_stages", "--virtual", 1);
  add("microbatches", "--microbatches", -1);
  return flags + " --times F,B";
}

}  // namespace

std::optional<StageTimesFile> ReadStageTimesFile(const std::string& path, int microbatches,
                                                 double backward_ratio, std::string* error) {
  // A stage-times file is a few kilobytes: 64 MiB is past any real one.
  std::optional<std::string> text = ReadInputFile(path, size_t{64} << 20, error);
  if (!text) return std::nullopt;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    *error = fmt::format("{}: not JSON ({})", path, e.what());
    return std::nullopt;
  }
  if (!doc.is_object()) {
    *error = fmt::format("{}: not a JSON object", path);
    return std::nullopt;
  }
  if (IsScheduleOutput(doc)) {
    *error = fmt::format(
        "{}: this is `freeride schedule --json` output (each rank's actions and idle slots), not "
        "stage times. --stage-times expects a stage-times config {{\"stages\": [{{\"forward_ms\": F, "
        "\"backward_ms\": B}}, ...]}} or `freeride profile --json` output; to simulate that "
        "schedule, give {} instead",
        path, FlagsOfSchedule(doc));
    return std::nullopt;
  }
  try {
    if (doc.contains("stages")) return FromConfig(doc);
    if (doc.contains("ranks")) return FromProfile(doc, microbatches, backward_ratio);
    *error = fmt::format(
        "{}: neither a stage-times config (\"stages\") nor `freeride profile --json` output "
        "(\"ranks\")",
        path);
  } catch (const std::exception& e) {
    *error = fmt::format("{}: {}", path, e.what());
  }
  return std::nullopt;
}

}  // namespace freeride::sim
