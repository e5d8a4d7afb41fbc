// What the node's NVIDIA tools say, for the daemon and the CLI.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace freeride {

// True when `name` is a command on PATH.  It goes to /bin/sh inside single
// quotes: callers pass fixed names.
bool CommandExists(const std::string& name);

// Runs `nvidia-smi --query-<query> --format=csv,noheader,nounits` (e.g.
// query "gpu=index,memory.total") and returns each row whose first two fields
// are integers.  Empty when there is no nvidia-smi or no GPU.  Blocks while
// nvidia-smi runs; `query` goes to /bin/sh unquoted.
std::vector<std::pair<int64_t, uint64_t>> NvidiaSmiIntegerPairs(const std::string& query);

}  // namespace freeride
