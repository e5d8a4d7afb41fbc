// A driver for the fuzz targets where libFuzzer is not available (g++):
// runs every input of the given files and directories, then mutates them
// (bit flips, byte changes, inserts, deletes, splices) for -runs=N inputs or
// -max_total_time=S seconds.  An input that crashes is written to
// <-artifact_prefix>crash-<hash> before the process dies, so that it can be
// kept as a regression input.  Flags follow libFuzzer's spelling, so
// scripts/fuzz.sh drives both alike.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

std::vector<uint8_t> g_current;       // the input being run, for the crash handler
char g_artifact[4096] = "./crash-";   // prefix + "crash-"

uint64_t Hash(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

// Async-signal-safe: formats the hash by hand and uses only write/open.
void SaveCurrentInput() {
  char path[4200];
  size_t n = strlen(g_artifact);
  memcpy(path, g_artifact, n);
  uint64_t h = Hash(g_current);
  for (int i = 15; i >= 0; --i) {
    path[n + i] = "0123456789abcdef"[h & 15];
    h >>= 4;
  }
  path[n + 16] = '\0';
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current.size()) {
    ssize_t w = write(fd, g_current.data() + done, g_current.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  close(fd);
  const char msg[] = "fuzz: crashing input written to ";
  (void)!write(2, msg, sizeof(msg) - 1);
  (void)!write(2, path, strlen(path));
  (void)!write(2, "\n", 1);
}

void OnCrash(int signal) {
  SaveCurrentInput();
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void Run(const std::vector<uint8_t>& input) {
  g_current = input;
  LLVMFuzzerTestOneInput(input.data(), input.size());
}

void AddInputs(const std::string& path, std::vector<std::vector<uint8_t>>* corpus) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = opendir(path.c_str());
    if (!dir) return;
    std::vector<std::string> names;
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') names.push_back(path + "/" + e->d_name);
    closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) AddInputs(name, corpus);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string s = bytes.str();
  corpus->emplace_back(s.begin(), s.end());
}

std::vector<uint8_t> Mutate(const std::vector<std::vector<uint8_t>>& corpus, std::mt19937_64& rng,
                            size_t max_len) {
  std::vector<uint8_t> out = corpus.empty() ? std::vector<uint8_t>{} : corpus[rng() % corpus.size()];
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:
        if (!out.empty()) out[rng() % out.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!out.empty()) out[rng() % out.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:
        out.insert(out.begin() + (out.empty() ? 0 : rng() % (out.size() + 1)), static_cast<uint8_t>(rng()));
        break;
      case 3:
        if (!out.empty()) out.erase(out.begin() + rng() % out.size());
        break;
      case 4:
        if (!out.empty()) {  // duplicate a chunk
          size_t from = rng() % out.size(), len = 1 + rng() % std::min<size_t>(64, out.size() - from);
          std::vector<uint8_t> chunk(out.begin() + from, out.begin() + from + len);
          out.insert(out.begin() + rng() % (out.size() + 1), chunk.begin(), chunk.end());
        }
        break;
      case 5:
        if (!corpus.empty()) {  // splice with another input
          const auto& other = corpus[rng() % corpus.size()];
          size_t cut = out.empty() ? 0 : rng() % out.size();
          size_t from = other.empty() ? 0 : rng() % other.size();
          out.resize(cut);
          out.insert(out.end(), other.begin() + from, other.end());
        }
        break;
    }
    if (out.size() > max_len) out.resize(max_len);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 0;
  double max_seconds = 0;
  uint64_t seed = 1;
  size_t max_len = 64 * 1024;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0) runs = std::atol(a.c_str() + 6);
    else if (a.rfind("-max_total_time=", 0) == 0) max_seconds = std::atof(a.c_str() + 16);
    else if (a.rfind("-seed=", 0) == 0) seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-max_len=", 0) == 0) max_len = std::strtoull(a.c_str() + 9, nullptr, 10);
    else if (a.rfind("-artifact_prefix=", 0) == 0)
      snprintf(g_artifact, sizeof(g_artifact), "%scrash-", a.c_str() + 17);
    else if (a[0] == '-') fprintf(stderr, "fuzz: ignoring %s\n", a.c_str());
    else AddInputs(a, &corpus);
  }
  for (int s : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) signal(s, OnCrash);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(SaveCurrentInput);

  for (const auto& input : corpus) Run(input);
  std::mt19937_64 rng(seed);
  auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (;; ++done) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (runs > 0 && done >= runs) break;
    if (max_seconds > 0 && elapsed >= max_seconds) break;
    if (runs == 0 && max_seconds == 0) break;
    Run(Mutate(corpus, rng, max_len));
  }
  fprintf(stderr, "fuzz: %zu corpus inputs and %ld mutations, no crash\n", corpus.size(), done);
  return 0;
}
