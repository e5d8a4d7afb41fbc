#include "base/units.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>

namespace freeride {
namespace {

// Splits "12.5GiB" into a number and a suffix.  Returns false if there is no
// leading number.
bool SplitNumber(std::string_view text, double* value, std::string* suffix) {
  size_t start = 0, end = text.size();
  while (start < end && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  while (end > start && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  text = text.substr(start, end - start);
  size_t i = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
          (i == 0 && (text[i] == '-' || text[i] == '+')))) {
    ++i;
  }
  if (i == 0) return false;
  std::string number(text.substr(0, i));
  char* parse_end = nullptr;
  *value = std::strtod(number.c_str(), &parse_end);
  if (parse_end != number.c_str() + number.size() || !std::isfinite(*value)) return false;
  suffix->clear();
  for (char c : text.substr(i)) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      suffix->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return true;
}

}  // namespace

std::optional<uint64_t> ParseBytes(std::string_view text, std::string* error) {
  double value = 0;
  std::string suffix;
  if (!SplitNumber(text, &value, &suffix)) {
    *error = fmt::format("'{}' is not a size; use e.g. 512MiB, 2GiB or 4096", text);
    return std::nullopt;
  }
  struct Unit { const char* name; double factor; };
  static constexpr Unit kUnits[] = {
      {"", 1},          {"b", 1},
      {"k", 1e3},       {"kb", 1e3},   {"kib", 1024.0},
      {"m", 1e6},       {"mb", 1e6},   {"mib", 1048576.0},
      {"g", 1e9},       {"gb", 1e9},   {"gib", 1073741824.0},
      {"t", 1e12},      {"tb", 1e12},  {"tib", 1099511627776.0},
  };
  for (const Unit& unit : kUnits) {
    if (suffix == unit.name) {
      if (value < 0) {
        *error = fmt::format("size '{}' is negative", text);
        return std::nullopt;
      }
      double bytes = value * unit.factor;
      if (bytes >= 18446744073709551615.0) {
        *error = fmt::format("size '{}' is too large", text);
        return std::nullopt;
      }
      // Below 2^64, so the conversion is defined (llround stops at 2^63).
      return static_cast<uint64_t>(std::round(bytes));
    }
  }
  *error = fmt::format("unknown size unit '{}' in '{}'; use B, KiB, MiB, GiB, TiB (or K, M, G, T)",
                       suffix, text);
  return std::nullopt;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", value, kNames[unit]);
}

std::optional<int64_t> ParseDuration(std::string_view text, std::string* error) {
  double value = 0;
  std::string suffix;
  if (!SplitNumber(text, &value, &suffix)) {
    *error = fmt::format("'{}' is not a duration; use e.g. 250ms, 1.5s or 20us", text);
    return std::nullopt;
  }
  double factor;
  if (suffix == "ns") factor = 1;
  else if (suffix == "us") factor = 1e3;
  else if (suffix == "ms" || suffix.empty()) factor = 1e6;
  else if (suffix == "s") factor = 1e9;
  else if (suffix == "m" || suffix == "min") factor = 60e9;
  else {
    *error = fmt::format("unknown duration unit '{}' in '{}'; use ns, us, ms, s or m", suffix, text);
    return std::nullopt;
  }
  if (value < 0) {
    *error = fmt::format("duration '{}' is negative", text);
    return std::nullopt;
  }
  double nanos = value * factor;
  if (nanos > 9.2e18) {
    *error = fmt::format("duration '{}' is too long", text);
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(nanos));
}

std::string FormatDuration(int64_t nanos) {
  double v = static_cast<double>(nanos);
  if (std::abs(v) < 1e3) return fmt::format("{} ns", nanos);
  if (std::abs(v) < 1e6) return fmt::format("{:.1f} us", v / 1e3);
  if (std::abs(v) < 1e9) return fmt::format("{:.2f} ms", v / 1e6);
  return fmt::format("{:.2f} s", v / 1e9);
}

std::string Counted(int64_t count, std::string_view one, std::string_view many) {
  return std::to_string(count) + " " + std::string(count == 1 ? one : many);
}

}  // namespace freeride
