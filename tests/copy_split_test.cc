// Long one-dimensional copies cut into pieces that fit a bubble
// (gate/copy_split.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gate/copy_split.h"

namespace freeride::gate {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// A piece of a copy that involves the host.
constexpr size_t P = kCopyPieceBytes;
CuStream const kStream = reinterpret_cast<CuStream>(0x1000);

struct Piece {
  CuDevicePtr dst;
  const void* src;
  size_t bytes;
  CuStream stream;
  bool operator==(const Piece&) const = default;
};

const char* HostAt(size_t offset) { return reinterpret_cast<const char*>(0x7f0000000000) + offset; }

TEST(CopySplit, CopiesThatInvolveTheHostAreCutAboveTwoPiecesOfOneMiB) {
  for (GatedFunction f : {GatedFunction::kMemcpyHtoDAsync, GatedFunction::kMemcpyDtoHAsync,
                          GatedFunction::kMemcpyAsync, GatedFunction::kMemcpyHtoD, GatedFunction::kMemcpyDtoH,
                          GatedFunction::kMemcpy}) {
    EXPECT_EQ(CopyPieceBytes(f), 1 * kMiB);
    EXPECT_FALSE(CutsCopy(CopyPieceBytes(f), 2 * kMiB));
    EXPECT_TRUE(CutsCopy(CopyPieceBytes(f), 2 * kMiB + 1));
  }
  for (GatedFunction f : {GatedFunction::kMemcpyDtoDAsync, GatedFunction::kMemcpyDtoD}) {
    EXPECT_FALSE(CutsCopy(CopyPieceBytes(f), 128 * kMiB)) << "device memory: pieces of 64 MiB";
    EXPECT_TRUE(CutsCopy(CopyPieceBytes(f), 128 * kMiB + 1));
  }
}

TEST(CopySplit, KernelsFillsPeerAndMultiDimensionalCopiesAreNeverCut) {
  for (GatedFunction f : {GatedFunction::kLaunchKernel, GatedFunction::kGraphLaunch, GatedFunction::kMemsetD8Async,
                          GatedFunction::kMemsetD32, GatedFunction::kMemcpyPeerAsync, GatedFunction::kMemcpy2DAsync,
                          GatedFunction::kMemcpy3D}) {
    EXPECT_EQ(CopyPieceBytes(f), 0u);
    EXPECT_FALSE(CutsCopy(CopyPieceBytes(f), size_t{1} << 40));
  }
}

// Two and a half pieces from the host: two whole pieces and a half one, in
// order, each at its offset in both the destination and the source, on the
// copy's stream.
TEST(CopySplit, ACopyIsSubmittedAsItsPiecesInOrderEachAtItsOffset) {
  std::vector<Piece> pieces;
  auto submit = [&](CuDevicePtr d, const void* s, size_t n, CuStream st) {
    pieces.push_back({d, s, n, st});
    return kCudaSuccess;
  };
  const CuDevicePtr dst = 0x10000000;
  EXPECT_EQ(SubmitCopyInPieces(CopyPieceBytes(GatedFunction::kMemcpyHtoDAsync), submit, dst,
                               static_cast<const void*>(HostAt(0)), 5 * P / 2, kStream),
            kCudaSuccess);
  const std::vector<Piece> expected = {{dst, HostAt(0), P, kStream},
                                       {dst + P, HostAt(P), P, kStream},
                                       {dst + 2 * P, HostAt(2 * P), P / 2, kStream}};
  EXPECT_EQ(pieces, expected);
}

// A device-to-host copy's destination is on the host: both addresses move.
TEST(CopySplit, ADeviceToHostCopysHostDestinationMovesWithItsPieces) {
  std::vector<std::pair<void*, CuDevicePtr>> pieces;
  auto submit = [&](void* d, CuDevicePtr s, size_t) {
    pieces.emplace_back(d, s);
    return kCudaSuccess;
  };
  char* host = reinterpret_cast<char*>(0x7f0000000000);
  ASSERT_EQ(SubmitCopyInPieces(P, submit, static_cast<void*>(host), CuDevicePtr{0x2000}, 3 * P), kCudaSuccess);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].first, host + 2 * P);
  EXPECT_EQ(pieces[2].second, 0x2000 + 2 * P);
}

// The second piece fails: its error is returned, and no piece after it is submitted.
TEST(CopySplit, APieceThatFailsStopsTheCopyWithItsError) {
  int submitted = 0;
  auto submit = [&](CuDevicePtr, CuDevicePtr, size_t, CuStream) { return ++submitted == 2 ? 700 : kCudaSuccess; };
  EXPECT_EQ(SubmitCopyInPieces(P, submit, CuDevicePtr{1}, CuDevicePtr{2}, 10 * P, kStream), 700);
  EXPECT_EQ(submitted, 2);
}

// CutOrSubmit: a long copy in pieces unless its stream is capturing into a
// graph; a short one, or another entry point, as it came.
TEST(CopySplit, CutOrSubmitCutsOnlyLongCopiesOnStreamsNotCapturing) {
  for (const bool capturing : {false, true}) {
    std::vector<size_t> sizes;
    auto submit = [&](CuDevicePtr, const void*, size_t n, CuStream) {
      sizes.push_back(n);
      return kCudaSuccess;
    };
    auto wrapper = CutOrSubmit<GatedFunction::kMemcpyHtoDAsync>(submit, [&] { return capturing; },
                                                                [](CuDevicePtr, CuDevicePtr) { return false; });
    EXPECT_EQ(wrapper(CuDevicePtr{0}, static_cast<const void*>(HostAt(0)), 2 * P + P / 4, kStream), kCudaSuccess);
    EXPECT_EQ(wrapper(CuDevicePtr{0}, static_cast<const void*>(HostAt(0)), 2 * P, kStream), kCudaSuccess);
    if (capturing)
      EXPECT_EQ(sizes, (std::vector<size_t>{2 * P + P / 4, 2 * P}));
    else
      EXPECT_EQ(sizes, (std::vector<size_t>{P, P, P / 4, 2 * P}));
  }
  int launches = 0;
  auto launch = [&](CuDevicePtr, unsigned char, size_t, CuStream) { return ++launches, kCudaSuccess; };
  auto fill = CutOrSubmit<GatedFunction::kMemsetD8Async>(launch, [] { return false; },
                                                         [](CuDevicePtr, CuDevicePtr) { return true; });
  EXPECT_EQ(fill(CuDevicePtr{0}, static_cast<unsigned char>(0), size_t{1} << 30, kStream), kCudaSuccess);
  EXPECT_EQ(launches, 1) << "a fill is never cut";
}

// cuMemcpyAsync infers the direction from the addresses: both in one
// device's memory, pieces of 64 MiB (a copy of 100 MiB is not cut);
// otherwise of kCopyPieceBytes.  The addresses are asked about only for a copy long
// enough to cut, and not being captured.
TEST(CopySplit, AUnifiedAddressCopyBetweenDeviceAddressesIsCutAsADeviceToDeviceOne) {
  const CuDevicePtr device_a = 0x10000000, device_b = 0x90000000, host = 0x7f0000000000;
  auto on_device = [&](CuDevicePtr d, CuDevicePtr s) { return d != host && s != host; };
  std::vector<size_t> sizes;
  auto submit = [&](CuDevicePtr, CuDevicePtr, size_t n, CuStream) {
    sizes.push_back(n);
    return kCudaSuccess;
  };
  auto wrapper = CutOrSubmit<GatedFunction::kMemcpyAsync>(submit, [] { return false; }, on_device);
  ASSERT_EQ(wrapper(device_a, device_b, 100 * kMiB, kStream), kCudaSuccess);
  EXPECT_EQ(sizes, (std::vector<size_t>{100 * kMiB}));
  sizes.clear();
  ASSERT_EQ(wrapper(device_a, device_b, 129 * kMiB, kStream), kCudaSuccess);
  EXPECT_EQ(sizes, (std::vector<size_t>{64 * kMiB, 64 * kMiB, 1 * kMiB}));
  sizes.clear();
  ASSERT_EQ(wrapper(device_a, host, 2 * P + P / 4, kStream), kCudaSuccess);
  EXPECT_EQ(sizes, (std::vector<size_t>{P, P, P / 4}));
  int asked = 0;
  bool capturing = false;
  auto counting = CutOrSubmit<GatedFunction::kMemcpyAsync>(submit, [&] { return capturing; },
                                                            [&](CuDevicePtr, CuDevicePtr) { return ++asked, true; });
  ASSERT_EQ(counting(device_a, device_b, 2 * P, kStream), kCudaSuccess);
  EXPECT_EQ(asked, 0) << "a copy too short to cut asks nothing";
  capturing = true;
  ASSERT_EQ(counting(device_a, device_b, 200 * kMiB, kStream), kCudaSuccess);
  EXPECT_EQ(asked, 0) << "nor does one being captured";
}

}  // namespace
}  // namespace freeride::gate
