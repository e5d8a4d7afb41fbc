#include "gate/symbol_table.h"

#include <cstring>
#include <string_view>

namespace freeride::gate {

namespace {

struct Names {
  const char* base;
  const char* legacy;
  const char* per_thread;
  int min_version;
};

constexpr Names kGated[] = {
#define FREERIDE_GATE_NAMES(id, base, legacy, per_thread, min_version, ...) \
  {base, legacy, per_thread, min_version},
    FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_NAMES)
#undef FREERIDE_GATE_NAMES
};

constexpr Names kOrdered[] = {
#define FREERIDE_GATE_NAMES(id, base, legacy, per_thread, min_version, ...) \
  {base, legacy, per_thread, min_version},
    FREERIDE_ORDERED_FUNCTIONS(FREERIDE_GATE_NAMES)
#undef FREERIDE_GATE_NAMES
};

constexpr const char* kUncovered[] = {
#define FREERIDE_GATE_NAMES(id, base) base,
    FREERIDE_UNCOVERED_FUNCTIONS(FREERIDE_GATE_NAMES)
#undef FREERIDE_GATE_NAMES
};

// Only names of the driver API can match: a cheap filter for the dlsym of
// every other symbol the process looks up.
bool DriverName(const char* name) { return name && name[0] == 'c' && name[1] == 'u'; }

// The entry of `table` exported as `name`, and whether as its per-thread
// variant (an entry whose two exports are one name reads as legacy).
template <typename Symbol, typename Function, size_t N>
std::optional<Symbol> ByExportName(const Names (&table)[N], const char* name) {
  if (!DriverName(name)) return std::nullopt;
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(name, table[i].legacy) == 0) return Symbol{Function(i), false};
    if (std::strcmp(name, table[i].per_thread) == 0) return Symbol{Function(i), true};
  }
  return std::nullopt;
}

// The entry of `table` that cuGetProcAddress(name, cuda_version, flags) finds.
template <typename Symbol, typename Function, size_t N>
std::optional<Symbol> ByBaseName(const Names (&table)[N], const char* name, int cuda_version, uint64_t flags) {
  if (!DriverName(name)) return std::nullopt;
  // A name's entries come newest signature first: the first the version meets.
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(name, table[i].base) != 0 || cuda_version < table[i].min_version) continue;
    return Symbol{Function(i), (flags & kProcAddressPerThreadStream) != 0};
  }
  return std::nullopt;
}

}  // namespace

std::optional<GatedSymbol> GatedByExportName(const char* name) {
  return ByExportName<GatedSymbol, GatedFunction>(kGated, name);
}

std::optional<GatedSymbol> GatedByBaseName(const char* name, int cuda_version, uint64_t flags) {
  return ByBaseName<GatedSymbol, GatedFunction>(kGated, name, cuda_version, flags);
}

std::optional<OrderedSymbol> OrderedByExportName(const char* name) {
  return ByExportName<OrderedSymbol, OrderedFunction>(kOrdered, name);
}

std::optional<OrderedSymbol> OrderedByBaseName(const char* name, int cuda_version, uint64_t flags) {
  return ByBaseName<OrderedSymbol, OrderedFunction>(kOrdered, name, cuda_version, flags);
}

bool LookupRefusedForVersion(const char* name, int cuda_version) {
  if (!DriverName(name)) return false;
  // Refused only where an older form exists: the name's oldest entry (the
  // last) is itself a "_v2", which replaced a first one.  A name first
  // declared at its oldest entry's version is the driver's to answer.
  const Names* oldest = nullptr;
  for (const Names& names : kGated) {
    if (std::strcmp(name, names.base) != 0) continue;
    if (cuda_version >= names.min_version) return false;
    oldest = &names;
  }
  return oldest && std::string_view(oldest->legacy).ends_with("_v2");
}

std::optional<UncoveredFunction> UncoveredByName(const char* name) {
  if (!DriverName(name)) return std::nullopt;
  std::string_view view(name);
  for (std::string_view suffix : {"_ptsz", "_ptds"})
    if (view.size() > suffix.size() && view.ends_with(suffix)) view.remove_suffix(suffix.size());
  for (std::string_view suffix : {"_v2"})
    if (view.size() > suffix.size() && view.ends_with(suffix)) view.remove_suffix(suffix.size());
  for (size_t i = 0; i < std::size(kUncovered); ++i)
    if (view == kUncovered[i]) return UncoveredFunction(i);
  return std::nullopt;
}

const char* BaseName(GatedFunction function) { return kGated[static_cast<size_t>(function)].base; }
const char* BaseName(OrderedFunction function) { return kOrdered[static_cast<size_t>(function)].base; }
const char* BaseName(UncoveredFunction function) {
  return kUncovered[static_cast<size_t>(function)];
}

}  // namespace freeride::gate
