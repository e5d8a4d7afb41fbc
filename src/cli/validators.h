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

}  // namespace freeride::cli
