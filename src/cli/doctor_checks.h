// `freeride doctor`: checks of one node, each giving findings that say what
// was found and, when something is wrong, what to do.  The checks that read
// the system take the paths and programs to look at as arguments; the ones
// that only interpret what was read are pure, so tests can feed them any
// node (a driver that fails, a daemon with lanes, a Python without torch).
// All functions may be called from any thread.
#pragma once
#include <string>
#include <vector>

#include "cli/cuda_driver.h"
#include "freeride.pb.h"

namespace freeride::cli {

enum class Severity {
  kOk,       // works
  kNote,     // worth knowing; nothing to fix (e.g. no GPU: CPU lanes only)
  kWarning,  // FreeRide runs, with less than it could (e.g. no MPS: time-sliced GPUs)
  kBlocker,  // FreeRide cannot run until it is fixed
};

struct Finding {
  std::string area;  // "driver", "gpu 0", "mps", "shm", "state dir", "socket", ...
  Severity severity = Severity::kOk;
  std::string what;  // what was found
  std::string fix;   // what to do; empty when nothing needs doing
};

// The driver and each GPU: whether the driver loads and initialises, the
// compute mode, cuLaunchHostFunc (stream-ordered marks) and the stream
// memory operation attributes.  nvidia_smi: whether nvidia-smi is on PATH
// (the daemon reads GPU memory with it).  Pure.
std::vector<Finding> CheckGpus(const CudaDriverInfo& driver, bool nvidia_smi);

// Whether an MPS control daemon runs or can be started for the GPUs: with
// GPUs, uses a running one or starts one in a temporary folder under
// scratch_dir and stops it again.
Finding CheckMps(const CudaDriverInfo& driver, const std::string& scratch_dir);

// The shared-memory folder (normally /dev/shm): a tmpfs-like folder this
// user can create, map and remove files in, with room for the segments.
std::vector<Finding> CheckSharedMemory(const std::string& dir);

// The daemon's state directory: it exists or can be made, is a directory
// this user owns and can write, and is not open to other users.
Finding CheckStateDir(const std::string& dir);

// The socket path: short enough for a Unix socket, in a folder that exists
// or can be made and that this user can write; an existing file there is a
// socket.
Finding CheckSocketPath(const std::string& socket_path);

// Asks the daemon at socket_path for its stats; findings for the daemon,
// each lane (its stage attached or not) and the isolation in use.
std::vector<Finding> CheckDaemon(const std::string& socket_path);

// The findings for a daemon's stats reply.  Pure.
std::vector<Finding> DescribeDaemon(const v1::StatsReply& stats);

// Runs `python` with a probe that imports torch, torch.distributed.pipelining
// and the freeride package (python_path first on PYTHONPATH, bin_dir first
// on PATH, where the package looks for libfreeride), and interprets its answer.
std::vector<Finding> CheckPython(const std::string& python, const std::string& python_path,
                                 const std::string& bin_dir);

// The findings for the probe's exit status and output (JSON).  Pure.
std::vector<Finding> InterpretPythonProbe(const std::string& python, int exit_status,
                                          const std::string& output);

// The probe run by CheckPython: prints one JSON object.
extern const char kPythonProbe[];

// The isolation a daemon started now would use, from the driver and
// CheckMps's finding: for a node with no daemon running.  Pure.
Finding ExpectedIsolation(const CudaDriverInfo& driver, const Finding& mps);

// True when a finding blocks FreeRide.  Pure.
bool AnyBlocker(const std::vector<Finding>& findings);

// The report: one line per finding (and a "fix:" line under it), then a
// summary line.  Pure.
std::string FormatFindings(const std::vector<Finding>& findings);

}  // namespace freeride::cli
