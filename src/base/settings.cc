#include "base/settings.h"

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace freeride {

uint64_t WholeNumberSetting(const char* who, const char* name, uint64_t fallback, uint64_t least, uint64_t most,
                            const char* unit) noexcept {
  assert(least <= fallback && fallback <= most);
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  const int saved_errno = errno;  // the caller's, left as it was
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  // strtoull takes a sign and leading blanks; a setting is digits alone.
  const bool digits = text[0] >= '0' && text[0] <= '9' && *end == '\0';
  const bool taken = digits && errno == 0 && value >= least && value <= most;
  errno = saved_errno;
  if (taken) return value;
  std::fprintf(stderr, "%s: %s=%s is not a whole number%s%s from %llu to %llu; using %llu\n", who, name, text,
               unit ? " of " : "", unit ? unit : "", static_cast<unsigned long long>(least),
               static_cast<unsigned long long>(most), static_cast<unsigned long long>(fallback));
  return fallback;
}

int ChoiceSetting(const char* who, const char* name, std::initializer_list<const char*> choices,
                  int fallback) noexcept {
  assert(fallback >= 0 && fallback < static_cast<int>(choices.size()));
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  int index = 0;
  for (const char* choice : choices) {
    if (std::strcmp(text, choice) == 0) return index;
    ++index;
  }
  // Written piece by piece: nothing is allocated in the program this runs in.
  std::fprintf(stderr, "%s: %s=%s is not ", who, name, text);
  index = 0;
  for (const char* choice : choices) {
    std::fputs(index == 0 ? "" : index + 1 == static_cast<int>(choices.size()) ? " or " : ", ", stderr);
    std::fputs(choice, stderr);
    ++index;
  }
  std::fprintf(stderr, "; using %s\n", choices.begin()[fallback]);
  return fallback;
}

}  // namespace freeride
