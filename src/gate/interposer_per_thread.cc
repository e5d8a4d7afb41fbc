// The per-thread-default-stream names of the ordered entry points
// (gate/ordered_functions.h), exported by libfreeride_gate.so for programs
// linked against libcuda, as interposer.cc exports their legacy names.  A
// file of its own, each definition weak: where an entry has no per-thread
// form its per-thread name is its legacy one, which interposer.cc defines
// (strong, and so kept by the link), and this weak one is dropped.
#include "gate/ordered_functions.h"

using namespace freeride::gate;

extern "C" {

#define FREERIDE_ORDERED_DIRECT_PT(id, base, legacy, per_thread, min_version, params, args) \
  CuResult FreerideOrderedPt##id params; /* interposer.cc: Ordered##id<true> */           \
  __attribute__((weak, visibility("default"))) CuResult FreerideOrderedDirectPt##id params \
      __asm__(per_thread);                                                                 \
  CuResult FreerideOrderedDirectPt##id params { return FreerideOrderedPt##id args; }
FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_DIRECT_PT)
#undef FREERIDE_ORDERED_DIRECT_PT

}  // extern "C"
