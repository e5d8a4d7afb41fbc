// The gate page's word (FREERIDE_GATE_PAGE), for a client scenario that
// shuts and opens the gate itself as the stage's stream would; exits 2
// without one.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

inline std::atomic<uint32_t>* MapGateWord() {
  const char* path = getenv("FREERIDE_GATE_PAGE");
  int fd = path ? open(path, O_RDWR) : -1;
  void* page = fd >= 0 ? mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (page == MAP_FAILED) {
    std::printf("no gate page\n");
    std::exit(2);
  }
  return static_cast<std::atomic<uint32_t>*>(page);
}
