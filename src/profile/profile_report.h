// Renders rank profiles: a table for people, JSON and CSV for tools, and an
// SVG timeline with the bubbles marked.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile/bubble_profile.h"

namespace freeride::profile {

// The readable report: one block per rank with its slots (or, for a rank
// whose gaps form no slots, the reason and each iteration's gaps).
std::string FormatProfileTable(const std::vector<RankProfile>& ranks, double min_bubble_ms);

// Stable keys other tools read: top-level "ranks"; per rank "rank",
// "iteration_ms", "idle_fraction", "free_memory_bytes" and "bubbles"
// (objects with "start_ms", "duration_ms", "type"), all medians; a rank
// whose gaps form no slots has no bubbles and a "slots_conflict" reason.
nlohmann::json ProfileToJson(const std::vector<RankProfile>& ranks, double min_bubble_ms);

// One row per rank and slot, with a header row.
std::string ProfileToCsv(const std::vector<RankProfile>& ranks);

// One lane per rank showing the first profiled iteration: busy spans grey,
// bubbles coloured by type and labelled with their length.
std::string RenderProfileSvg(const std::vector<RankProfile>& ranks);

}  // namespace freeride::profile
