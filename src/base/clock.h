// Time in FreeRide: nanoseconds as plain integers.  Policy code takes the
// time as an argument; mechanism reads it through an Env (base/env.h), or
// directly where no test needs to fake it.
#pragma once
#include <cstdint>

namespace freeride {

using Nanos = int64_t;  // nanoseconds on CLOCK_MONOTONIC unless stated

constexpr Nanos kMicrosecond = 1000;
constexpr Nanos kMillisecond = 1000 * kMicrosecond;
constexpr Nanos kSecond = 1000 * kMillisecond;

// Reads CLOCK_MONOTONIC directly; cheap (vDSO), never blocks.  Any thread.
Nanos MonotonicNow();
// Wall-clock time in nanoseconds since the epoch, for journals and logs.
// It can jump, so intervals use MonotonicNow.  Any thread.
Nanos WallNow();

}  // namespace freeride
