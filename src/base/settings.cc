#include "base/settings.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace freeride {

uint64_t WholeNumberSetting(const char* who, const char* name, uint64_t fallback, uint64_t least,
                            uint64_t most) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  // strtoull takes a sign and leading blanks; a setting is digits alone.
  const bool digits = text[0] >= '0' && text[0] <= '9' && *end == '\0';
  if (digits && errno == 0 && value >= least && value <= most) return value;
  std::fprintf(stderr, "%s: %s=%s is not a whole number from %llu to %llu; using %llu\n", who, name, text,
               static_cast<unsigned long long>(least), static_cast<unsigned long long>(most),
               static_cast<unsigned long long>(fallback));
  return fallback;
}

int ChoiceSetting(const char* who, const char* name, std::initializer_list<const char*> choices, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  int index = 0;
  std::string listed;
  for (const char* choice : choices) {
    if (std::strcmp(text, choice) == 0) return index;
    listed += (index == 0 ? "" : index + 1 == static_cast<int>(choices.size()) ? " or " : ", ");
    listed += choice;
    ++index;
  }
  const char* used = fallback >= 0 && fallback < static_cast<int>(choices.size()) ? choices.begin()[fallback] : "";
  std::fprintf(stderr, "%s: %s=%s is not %s; using %s\n", who, name, text, listed.c_str(), used);
  return fallback;
}

}  // namespace freeride
