// Parsing and printing of human-facing quantities (sizes, durations).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace freeride {

// Parses "2GiB", "512MiB", "1.5G", "4096", "64k" into bytes.  Binary (KiB)
// and decimal (KB, K) suffixes are honoured; a bare number is bytes.
// Returns nullopt and sets *error (not null) for anything else, negative
// values or values that do not fit in 64 bits.  Any thread.
std::optional<uint64_t> ParseBytes(std::string_view text, std::string* error);

// Formats bytes with a binary suffix, e.g. "1.50 GiB".
std::string FormatBytes(uint64_t bytes);

// Parses "250ms", "1.5s", "20us", "3m" into nanoseconds.  A bare number is
// milliseconds; the units are ns, us, ms, s and m (or min).  Returns nullopt
// and sets *error (not null) for anything else, negative values or values
// that do not fit in an int64.  Any thread.
std::optional<int64_t> ParseDuration(std::string_view text, std::string* error);

// Formats nanoseconds as the most readable of ns/us/ms/s.
std::string FormatDuration(int64_t nanos);

// "1 stage", "4 stages": `count` and the noun that goes with it.
std::string Counted(int64_t count, std::string_view one, std::string_view many);

}  // namespace freeride
