/* A stand-in training stage in plain C: it alternates busy time with
 * bubbles of given lengths through the C ABI, as an instrumented pipeline
 * stage would.  Useful to try a daemon without a training job.
 *
 *   example_stage_replay --lane 0 --iterations 100 --busy-ms 20 --bubbles-ms 5,12,3
 *
 * Or the bubbles of a profiled rank, at their offsets in the iteration (as
 * `freeride profile --json` gives them: start_ms and duration_ms per slot):
 *
 *   example_stage_replay --iteration-ms 123.2 --slots-ms 6.4:5.7,40.1:12.0
 *
 * The busy time spins the CPU until the time is up, like a CPU training
 * stage; --busy sleep lets the CPU idle instead, as a GPU stage's host thread
 * mostly does; --busy work does a fixed amount of arithmetic calibrated to
 * the busy time at start, so that a process stealing the stage's core makes
 * the iterations longer, as it would a real stage's.  --device-lock PATH
 * holds an exclusive lock on PATH through each busy time, standing for the
 * device the stage's kernels run on: a side task that holds it past its
 * bubble delays the stage as a side kernel still running on the GPU would.
 * --slot-base N numbers the slots from N (a stand-in beside a real stage's).
 */
#include <fcntl.h>
#include <freeride/freeride.h>
#include <sys/file.h>
#include <unistd.h>
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

static double work_rounds_per_ns = 0;

static void work_rounds(int64_t rounds) {
  volatile double sink = 1.0;
  for (int64_t r = 0; r < rounds; ++r) sink = sink * 1.0000001 + 1e-9;
}

/* The rounds of work_rounds that take one nanosecond on an idle core: the
 * fastest of a few tries, so that a busy moment at start does not shrink
 * every busy time. */
static void calibrate_work(void) {
  const int64_t rounds = 2000000;
  for (int attempt = 0; attempt < 5; ++attempt) {
    int64_t start = freeride_now_ns();
    work_rounds(rounds);
    double rate = (double)rounds / (double)(freeride_now_ns() - start);
    if (rate > work_rounds_per_ns) work_rounds_per_ns = rate;
  }
}

static void work_for_ns(int64_t ns) { work_rounds((int64_t)(ns * work_rounds_per_ns)); }

int main(int argc, char** argv) {
  int lane = 0, iterations = 100;
  double busy_ms = 20;
  const char* bubbles = "5,12,3";
  const char* socket = NULL;
  const char* slots = NULL;
  double iteration_ms = 0;
  void (*busy)(int64_t) = spin_for_ns;
  const char* device_lock = NULL;
  int slot_base = 0;
  const char* usage =
      "usage: %s [--lane K] [--iterations N] [--busy-ms B] [--bubbles-ms a,b,c] "
      "[--iteration-ms T --slots-ms start:len,...] [--busy spin|sleep|work] [--device-lock PATH] [--slot-base N] "
      "[--socket PATH]\n";
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf(usage, argv[0]);
      return 0;
    }
    if (i + 1 == argc) {
      fprintf(stderr, "%s: %s wants a value\n", argv[0], argv[i]);
      fprintf(stderr, usage, argv[0]);
      return 2;
    }
    if (!strcmp(argv[i], "--lane")) lane = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iterations")) iterations = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--busy-ms")) busy_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--bubbles-ms")) bubbles = argv[i + 1];
    else if (!strcmp(argv[i], "--socket")) socket = argv[i + 1];
    else if (!strcmp(argv[i], "--slots-ms")) slots = argv[i + 1];
    else if (!strcmp(argv[i], "--iteration-ms")) iteration_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--busy") && !strcmp(argv[i + 1], "spin")) busy = spin_for_ns;
    else if (!strcmp(argv[i], "--busy") && !strcmp(argv[i + 1], "sleep")) busy = sleep_for_ns;
    else if (!strcmp(argv[i], "--busy") && !strcmp(argv[i + 1], "work")) busy = work_for_ns;
    else if (!strcmp(argv[i], "--device-lock")) device_lock = argv[i + 1];
    else if (!strcmp(argv[i], "--slot-base")) slot_base = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "%s: unknown option or value: %s %s\n", argv[0], argv[i], argv[i + 1]);
      fprintf(stderr, usage, argv[0]);
      return 2;
    }
  }
  /* Each slot: the busy time before it, then its bubble. */
  double busy_before[64], lengths[64];
  int count = 0;
  char* copy = strdup(slots ? slots : bubbles);
  double previous_end = 0;
  for (char* tok = strtok(copy, ","); tok && count < 64; tok = strtok(NULL, ",")) {
    if (slots) {
      double start = atof(tok);
      const char* colon = strchr(tok, ':');
      lengths[count] = colon ? atof(colon + 1) : 0;
      busy_before[count] = start - previous_end;
      previous_end = start + lengths[count];
      if (!colon || busy_before[count] < 0 || lengths[count] <= 0) {
        fprintf(stderr, "--slots-ms: '%s' is not START:LENGTH in order, without overlaps\n", tok);
        return 2;
      }
    } else {
      lengths[count] = atof(tok);
    }
    ++count;
  }
  free(copy);
  if (!slots)
    for (int s = 0; s < count; ++s) busy_before[s] = busy_ms / count;
  double tail_ms = slots ? iteration_ms - previous_end : 0;
  if (count == 0 || iterations <= 0 || tail_ms < 0) {
    fprintf(stderr, "need at least one bubble, one iteration, and slots inside --iteration-ms\n");
    return 2;
  }
  if (busy == work_for_ns) calibrate_work();
  int lock_fd = -1;
  if (device_lock && (lock_fd = open(device_lock, O_RDWR | O_CREAT, 0600)) < 0) {
    perror(device_lock);
    return 2;
  }
  freeride_stage* stage = freeride_stage_open(lane, socket);
  printf("stage on lane %d: %s\n", lane,
         freeride_stage_attached(stage) ? "attached to a daemon" : "no daemon (marks are no-ops)");
  for (int it = 0; it < iterations; ++it) {
    for (int s = 0; s < count; ++s) {
      if (lock_fd >= 0) flock(lock_fd, LOCK_EX);
      busy((int64_t)(busy_before[s] * 1e6));
      if (lock_fd >= 0) flock(lock_fd, LOCK_UN);
      freeride_bubble_begin(stage, (uint32_t)(slot_base + s), 0, UINT64_MAX);
      sleep_for_ns((int64_t)(lengths[s] * 1e6));
      freeride_bubble_end(stage);
    }
    if (tail_ms > 0) busy((int64_t)(tail_ms * 1e6));
  }
  freeride_stage_close(stage);
  return 0;
}
