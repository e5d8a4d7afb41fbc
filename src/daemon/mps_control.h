// CUDA MPS for the side tasks of GPU lanes: the daemon uses a running MPS
// control daemon or starts one whose pipe directory is in its state
// directory.  Side tasks then join it at client priority 1 (below the
// trainer's 0), each with a pinned device-memory limit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace freeride {

enum class MpsMode { kOff, kAuto, kOn };

// Parses "off", "auto" or "on"; false for anything else.
bool ParseMpsMode(const std::string& text, MpsMode* mode);

struct MpsSetup {
  std::string pipe_dir;     // empty: no MPS
  bool started_by_us = false;
  std::string note;         // what happened, for the daemon's start message
};

// Finds or starts an MPS control daemon.  With kAuto a failure leaves MPS
// off (the note says why); with kOn it is an error (returns false, *error).
// Starting one blocks up to about 5 s while it makes its pipe.
bool SetUpMps(MpsMode mode, const std::string& state_dir, MpsSetup* setup, std::string* error);

// Stops the control daemon if SetUpMps started it.
void TearDownMps(const MpsSetup& setup);

// Environment entries for a side task on GPU `gpu` under MPS (with
// `pipe_dir`) or without it (empty): the device, the client priority, the
// pinned memory limit (memory_bytes 0: none; else whole MiB, at least 1) and
// the share of the GPU's SMs its kernels may use (thread_percentage 0 or
// 100: all; under MPS only).  Pure.
std::vector<std::string> GpuTaskEnvironment(int gpu, const std::string& pipe_dir,
                                            uint64_t memory_bytes, int thread_percentage = 0);

}  // namespace freeride
