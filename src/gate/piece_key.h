// The kind of a piece of GPU work, under which its length is learned
// (gate/piece_lengths.h): a kernel by its function and the shape of its
// launch (grid and block), a graph by its executable, a one-dimensional
// asynchronous copy or fill by its entry point and size.  Work of one kind
// takes about as long each time; other work (a two- or three-dimensional
// copy, whose size lies behind a descriptor; a two-dimensional fill; a
// synchronous call) has no kind (0) and is predicted by the 95th percentile
// of all timed pieces.
//
// PieceKeyOf<id>(the entry point's arguments) is what the interposer's
// wrapper for entry point `id` calls.  Pure; never 0 for a piece of a kind.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gate/driver_types.h"
#include "gate/gated_functions.h"

namespace freeride::gate {

// A 64-bit mix of `value` into `hash` (splitmix64's finaliser): kinds that
// differ in one field land far apart.
constexpr uint64_t MixIntoKey(uint64_t hash, uint64_t value) {
  uint64_t z = hash ^ (value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The key of the kind made of `fields`, tagged by the entry point `kind`; never 0.
template <typename... Fields>
constexpr uint64_t KeyOf(GatedFunction kind, Fields... fields) {
  uint64_t hash = MixIntoKey(0, static_cast<uint64_t>(kind) + 1);
  ((hash = MixIntoKey(hash, static_cast<uint64_t>(fields))), ...);
  return hash == 0 ? 1 : hash;
}

namespace piece_key_internal {
inline uint64_t Address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }
}  // namespace piece_key_internal

template <GatedFunction kId, typename... Args>
uint64_t PieceKeyOf(const Args&... args) {
  using piece_key_internal::Address;
  constexpr GatedFunction id = kId;
  // The arguments as the entry point's list declares them (gated_functions.h).
  if constexpr (id == GatedFunction::kLaunchKernel || id == GatedFunction::kLaunchCooperativeKernel) {
    auto kernel = [](void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shm, auto&&...) {
      return KeyOf(GatedFunction::kLaunchKernel, Address(f), gx, gy, gz, bx, by, bz, shm);
    };
    return kernel(args...);
  } else if constexpr (id == GatedFunction::kLaunchKernelEx) {
    auto kernel = [](const LaunchConfigHead* c, void* f, auto&&...) -> uint64_t {
      if (!c) return 0;
      // The same kind as cuLaunchKernel's launch of the same shape.
      return KeyOf(GatedFunction::kLaunchKernel, Address(f), c->grid[0], c->grid[1], c->grid[2], c->block[0],
                   c->block[1], c->block[2], c->shared_mem_bytes);
    };
    return kernel(args...);
  } else if constexpr (id == GatedFunction::kGraphLaunch) {
    auto graph = [](void* exec, auto&&...) { return KeyOf(GatedFunction::kGraphLaunch, Address(exec)); };
    return graph(args...);
  } else if constexpr (id == GatedFunction::kMemcpyAsync || id == GatedFunction::kMemcpyHtoDAsync ||
                       id == GatedFunction::kMemcpyDtoHAsync || id == GatedFunction::kMemcpyDtoDAsync ||
                       id == GatedFunction::kMemsetD8Async || id == GatedFunction::kMemsetD16Async ||
                       id == GatedFunction::kMemsetD32Async) {
    // (destination, source or value, size, stream)
    auto sized = [](const auto&, const auto&, size_t n, auto&&...) { return KeyOf(kId, n); };
    return sized(args...);
  } else if constexpr (id == GatedFunction::kMemcpyPeerAsync) {
    auto sized = [](const auto&, const auto&, const auto&, const auto&, size_t n, auto&&...) {
      return KeyOf(kId, n);
    };
    return sized(args...);
  } else {
    return 0;
  }
}

}  // namespace freeride::gate
