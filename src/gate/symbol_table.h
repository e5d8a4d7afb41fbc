// Which driver entry point a name stands for: what the interposer answers
// when the program (or its CUDA runtime) looks a name up with dlsym or
// cuGetProcAddress.  Pure; any thread.
#pragma once
#include <cstdint>
#include <optional>

#include "gate/gated_functions.h"
#include "gate/ordered_functions.h"

namespace freeride::gate {

struct GatedSymbol {
  GatedFunction function;
  bool per_thread;  // the _ptsz/_ptds variant: stream 0 is the thread's own
};

// A name as exported by libcuda ("cuMemcpyHtoDAsync_v2_ptsz"), as dlsym is
// asked for it.
std::optional<GatedSymbol> GatedByExportName(const char* name);

// A name as cuGetProcAddress is asked for it ("cuMemcpyHtoDAsync"), with
// the caller's cudaVersion and flags: the newest of the name's signatures
// that version has.  Empty for names that are not gated, and for versions
// older than every signature the wrappers have: those are answered by
// LookupRefusedForVersion.
std::optional<GatedSymbol> GatedByBaseName(const char* name, int cuda_version, uint64_t flags);

// Whether cuGetProcAddress(name, version) asks for an entry point of the
// gated list in an older form than any wrapper's (the pre-3.2 32-bit-size
// copies): the gate answers "not supported" rather than pass it ungated.  A
// version older than the name itself (cuMemcpyBatchAsync before 12.8) is not
// refused: the driver answers that it has none.
bool LookupRefusedForVersion(const char* name, int cuda_version);

// The same for the entry points ordered against queued work
// (gate/ordered_functions.h), wrapped under launch ahead.
struct OrderedSymbol {
  OrderedFunction function;
  bool per_thread;
};
std::optional<OrderedSymbol> OrderedByExportName(const char* name);
std::optional<OrderedSymbol> OrderedByBaseName(const char* name, int cuda_version, uint64_t flags);

// An uncovered entry point, by base or exported name ("cuStreamBatchMemOp",
// "cuStreamBatchMemOp_v2", "..._ptsz").
std::optional<UncoveredFunction> UncoveredByName(const char* name);

// The name of a function in the lists (for messages).
const char* BaseName(GatedFunction function);
const char* BaseName(UncoveredFunction function);
const char* BaseName(OrderedFunction function);

}  // namespace freeride::gate
