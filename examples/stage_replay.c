/* A stand-in training stage in plain C: it alternates busy time with
 * bubbles of given lengths through the C ABI, as an instrumented pipeline
 * stage would.  Useful to try a daemon without a training job.
 *
 *   example_stage_replay --lane 0 --iterations 100 --busy-ms 20 --bubbles-ms 5,12,3
 */
#include <freeride/freeride.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void spin_for_ns(int64_t ns) {
  int64_t until = freeride_now_ns() + ns;
  while (freeride_now_ns() < until) {
  }
}

static void sleep_for_ns(int64_t ns) {
  struct timespec ts = {ns / 1000000000, ns % 1000000000};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  int lane = 0, iterations = 100;
  double busy_ms = 20;
  const char* bubbles = "5,12,3";
  const char* socket = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--lane")) lane = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iterations")) iterations = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--busy-ms")) busy_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--bubbles-ms")) bubbles = argv[i + 1];
    else if (!strcmp(argv[i], "--socket")) socket = argv[i + 1];
    else {
      fprintf(stderr, "usage: %s [--lane K] [--iterations N] [--busy-ms B] [--bubbles-ms a,b,c] "
                      "[--socket PATH]\n", argv[0]);
      return 2;
    }
  }
  double lengths[64];
  int count = 0;
  char* copy = strdup(bubbles);
  for (char* tok = strtok(copy, ","); tok && count < 64; tok = strtok(NULL, ","))
    lengths[count++] = atof(tok);
  free(copy);
  if (count == 0 || iterations <= 0) {
    fprintf(stderr, "need at least one bubble length and one iteration\n");
    return 2;
  }
  freeride_stage* stage = freeride_stage_open(lane, socket);
  printf("stage on lane %d: %s\n", lane,
         freeride_stage_attached(stage) ? "attached to a daemon" : "no daemon (marks are no-ops)");
  for (int it = 0; it < iterations; ++it) {
    for (int s = 0; s < count; ++s) {
      spin_for_ns((int64_t)(busy_ms * 1e6 / count));
      freeride_bubble_begin(stage, (uint32_t)s, 0, UINT64_MAX);
      sleep_for_ns((int64_t)(lengths[s] * 1e6));
      freeride_bubble_end(stage);
    }
  }
  freeride_stage_close(stage);
  return 0;
}
