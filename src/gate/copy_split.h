// Copies longer than a bubble, cut into pieces that fit one.  A kernel
// cannot be cut, but a one-dimensional copy can: its pieces, in order on the
// same stream (or, for a synchronous copy, one after another), do what it
// does.  A side program's start-up copies its weights from the host, one
// tensor at a time, and a tensor of 40 MB from pageable memory takes
// several milliseconds: longer than an interleaved or zero-bubble
// schedule's bubbles, so uncut it would either overrun one or, held back,
// never run.  Cut into pieces of kCopyPieceBytes, it runs across as many
// bubbles as it needs, each piece gated like any other (an asynchronous
// piece is also timed and fenced; a synchronous one, like any synchronous
// call, is not).  From pageable memory, pieces of 4 MiB took about 1.7 ms
// on an H200 node (the 95th percentile of a GPT-2 program's start-up; no
// piece was timed alone): too long for a zero-bubble schedule's 1-2 ms
// bubbles less their margin.  So pieces are 1 MiB, a quarter of that at
// the same rate; each costs the gate's calls of a piece (its wait, and now
// and then a fence and a timing), not timed here.
// The calling thread returns once the last piece is queued: an asynchronous
// copy may hold it across bubbles, as a kernel that does not fit would.
//
// Which entry points are cut: the one-dimensional copies that may involve
// the host (host to device, device to host, and the unified-address
// cuMemcpy and cuMemcpyAsync, whose direction the driver infers from the
// addresses), and device-to-device copies in larger pieces
// (kDeviceCopyPieceBytes: device memory copies a hundred times faster;
// a unified-address copy both of whose ends are one device's own memory,
// not managed, is one).  Not cut: peer copies, 2-D and 3-D
// copies, fills.  A copy a stream is capturing into a graph is not cut
// either: the graph is gated as a whole where it is launched.
//
// If a piece fails, the copy stops there and returns that piece's error,
// with the pieces before it submitted: the caller sees the failure, as it
// would of the whole copy, but where the whole copy would have been refused
// before copying anything (a range running past its allocation), the
// pieces before the failing one have been copied.
//
// Pure (no state): safe from any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "gate/driver_types.h"
#include "gate/gated_functions.h"

namespace freeride::gate {

inline constexpr size_t kCopyPieceBytes = size_t{1} << 20;
inline constexpr size_t kDeviceCopyPieceBytes = size_t{64} << 20;

// The bytes of the pieces entry point `f`'s copies are cut into (0: not cut).
constexpr size_t CopyPieceBytes(GatedFunction f) {
  switch (f) {
    case GatedFunction::kMemcpyAsync:
    case GatedFunction::kMemcpyHtoDAsync:
    case GatedFunction::kMemcpyDtoHAsync:
    case GatedFunction::kMemcpy:
    case GatedFunction::kMemcpyHtoD:
    case GatedFunction::kMemcpyDtoH:
      return kCopyPieceBytes;
    case GatedFunction::kMemcpyDtoDAsync:
    case GatedFunction::kMemcpyDtoD:
      return kDeviceCopyPieceBytes;
    default:
      return 0;
  }
}

// Whether a copy of `bytes` in pieces of `piece` bytes is cut: more than two of them.
constexpr bool CutsCopy(size_t piece, size_t bytes) { return piece > 0 && bytes > 2 * piece; }

// Whether `f` is a unified-address copy, whose direction lies in its addresses.
constexpr bool InfersDirection(GatedFunction f) {
  return f == GatedFunction::kMemcpy || f == GatedFunction::kMemcpyAsync;
}

// An address `offset` bytes on, host or device.
inline CuDevicePtr AdvanceAddress(CuDevicePtr p, size_t offset) { return p + offset; }
inline void* AdvanceAddress(void* p, size_t offset) { return static_cast<char*>(p) + offset; }
inline const void* AdvanceAddress(const void* p, size_t offset) { return static_cast<const char*>(p) + offset; }

// The bytes of a cut entry point's copy, from its arguments
// (destination, source, bytes[, stream]).
template <typename Dst, typename Src, typename... Rest>
size_t CopyBytes(Dst, Src, size_t bytes, Rest...) {
  return bytes;
}

// The arguments of the piece of `bytes` at `offset` of a copy made with
// `dst, src, total[, stream]`.
template <typename Dst, typename Src, typename... Rest>
std::tuple<Dst, Src, size_t, Rest...> CopyPieceArgs(size_t offset, size_t bytes, Dst dst, Src src, size_t /*total*/,
                                                      Rest... rest) {
  return {AdvanceAddress(dst, offset), AdvanceAddress(src, offset), bytes, rest...};
}

// The ends of a copy made with `dst, src, bytes[, stream]`.
template <typename Dst, typename Src, typename... Rest>
std::pair<Dst, Src> CopyEnds(Dst dst, Src src, size_t, Rest...) {
  return {dst, src};
}

// Submits the copy `args` as pieces of `piece` bytes, each by
// `submit_piece` (called with a piece's arguments; returns its result), in
// order; stops at the first piece that fails and returns its result.
template <typename SubmitPiece, typename... Args>
CuResult SubmitCopyInPieces(size_t piece, SubmitPiece&& submit_piece, Args... args) {
  const size_t total = CopyBytes(args...);
  for (size_t offset = 0; offset < total; offset += piece) {
    const size_t bytes = total - offset < piece ? total - offset : piece;
    const CuResult r = std::apply(submit_piece, CopyPieceArgs(offset, bytes, args...));
    if (r != kCudaSuccess) return r;
  }
  return kCudaSuccess;
}

// What a wrapper whose parameters are one parenthesised list applies them
// to: a callable that submits a copy of entry point `f` that CutsCopy, and
// whose stream is not `capturing()`, in pieces (SubmitCopyInPieces), and
// anything else as one piece, each by `submit_piece`.  A unified-address
// copy whose ends `on_one_device(dst, src)` says are one device's own memory
// is cut as a device-to-device one.  `capturing` and `on_one_device` are
// asked only of a copy long enough to be cut (each makes driver calls).
template <GatedFunction f, typename SubmitPiece, typename Capturing, typename OnOneDevice>
auto CutOrSubmit(SubmitPiece submit_piece, Capturing capturing, OnOneDevice on_one_device) {
  return [submit_piece, capturing, on_one_device](auto... args) -> CuResult {
    if constexpr (CopyPieceBytes(f) > 0) {
      const size_t bytes = CopyBytes(args...);
      size_t piece = CopyPieceBytes(f);
      if (!CutsCopy(piece, bytes) || capturing()) return submit_piece(args...);
      if constexpr (InfersDirection(f)) {
        const auto [dst, src] = CopyEnds(args...);
        if (on_one_device(dst, src)) piece = kDeviceCopyPieceBytes;
      }
      if (CutsCopy(piece, bytes)) return SubmitCopyInPieces(piece, submit_piece, args...);
    }
    return submit_piece(args...);
  };
}

}  // namespace freeride::gate
