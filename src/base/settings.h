// Settings that the libraries running inside users' processes (libfreeride,
// the gate's interposer) read from the environment.  A value the setting does
// not take is named on stderr, with what is used instead, and never stops the
// program: a trainer or a side task must not fail for a mistyped experiment.
// Thread-safe as getenv is (callers read each setting once).
#pragma once
#include <cstdint>
#include <initializer_list>

namespace freeride {

// The whole number in the environment variable `name` (digits alone), from
// `least` to `most`: `fallback` (itself within them) when it is unset or
// empty, and, with a warning that `who` names and that gives the number's
// `unit` if any, when it is anything else.  Leaves errno as it was.
uint64_t WholeNumberSetting(const char* who, const char* name, uint64_t fallback, uint64_t least, uint64_t most,
                            const char* unit = nullptr) noexcept;

// Which of `choices` the environment variable `name` holds, by its index:
// `fallback` (an index of `choices`) when it is unset or empty, and, with a
// warning that `who` names and that lists the choices, when it holds none of
// them.  Allocates nothing.
int ChoiceSetting(const char* who, const char* name, std::initializer_list<const char*> choices,
                  int fallback) noexcept;

}  // namespace freeride
