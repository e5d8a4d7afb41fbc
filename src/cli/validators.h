// Option checks CLI11 lacks.  Its PositiveNumber lets "nan" and "inf"
// through: a NaN timeout never fires, and a NaN refresh interval refreshes
// with no pause at all.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

namespace freeride::cli {

// A finite number of seconds below a billion (use with CLI::PositiveNumber).
inline CLI::Validator FiniteSeconds() {
  return CLI::Validator(
      [](std::string& text) {
        const double value = std::strtod(text.c_str(), nullptr);
        return std::isfinite(value) && value < 1e9 ? std::string() : "give a finite number of seconds";
      },
      "SECONDS");
}

// Makes every named option of `app` and its subcommands that takes a value
// refuse an empty one.  CLI11 converts "" to a number option's default, and
// the commands read an empty text as "not given", so `--priority ''` or
// `--lane-memory ''` silently meant the default.  Positional arguments (a
// program's own arguments after --) may be empty.  Call once, after all
// options are added and before parsing.
inline void RefuseEmptyValues(CLI::App& app) {
  const CLI::Validator not_empty(
      [](std::string& text) { return text.empty() ? std::string("give a value, not an empty one") : std::string(); },
      "");
  for (CLI::Option* option : app.get_options()) {
    if (!option->nonpositional() || option->get_expected_min() < 1) continue;
    option->check(not_empty);
  }
  for (CLI::App* subcommand : app.get_subcommands({})) RefuseEmptyValues(*subcommand);
}

}  // namespace freeride::cli
