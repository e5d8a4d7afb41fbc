// How `freeride simulate` shows its results: a table per stage and a
// summary, a scale-out table for --sweep, and JSON for both.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cluster_sim.h"

namespace freeride::sim {

std::string FormatSimResult(const SimResult& result);
nlohmann::json SimResultToJson(const SimResult& result);

// One row per scale: GPUs, pipelines, micro-batches, bubble fraction,
// harvest, overhead, GPU-equivalents and cost saving.
std::string FormatSweep(const std::vector<SimResult>& rows);
// The largest scale's figures at the top level, and every row under "sweep".
nlohmann::json SweepToJson(const std::vector<SimResult>& rows);

}  // namespace freeride::sim
