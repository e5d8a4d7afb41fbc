#include "daemon/gpu_query.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace freeride {

bool CommandExists(const std::string& name) {
  return std::system(("command -v '" + name + "' >/dev/null 2>&1").c_str()) == 0;
}

std::vector<std::pair<int64_t, uint64_t>> NvidiaSmiIntegerPairs(const std::string& query) {
  std::vector<std::pair<int64_t, uint64_t>> rows;
  std::string command = "nvidia-smi --query-" + query + " --format=csv,noheader,nounits 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return rows;
  char line[256];
  while (std::fgets(line, sizeof line, pipe.get())) {
    long long first = 0;
    unsigned long long second = 0;
    if (std::sscanf(line, "%lld, %llu", &first, &second) == 2) rows.emplace_back(first, second);
  }
  return rows;
}

}  // namespace freeride
