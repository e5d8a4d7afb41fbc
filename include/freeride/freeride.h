/* FreeRide C ABI: the stable surface for training stages and side tasks in
 * any language (the Python package binds it with ctypes).
 *
 * Every function is safe to call when no FreeRide daemon is running: stage
 * calls then do nothing, and task calls report that the task runs alone. */
#ifndef FREERIDE_FREERIDE_H_
#define FREERIDE_FREERIDE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FREERIDE_ABI_VERSION 4

/* The ABI version this library implements; compare with FREERIDE_ABI_VERSION. */
int freeride_abi_version(void);

/* CLOCK_MONOTONIC in nanoseconds, the time base of every mark. */
int64_t freeride_now_ns(void);

/* ------------------------------------------------------------------------
 * Training-stage side: bubble marks through shared memory.
 * ------------------------------------------------------------------------ */
typedef struct freeride_stage freeride_stage;

/* Opens the stage's side of lane `lane`'s bubble channel for the daemon at
 * socket_path (NULL: the default socket).  Never fails for lack of a daemon:
 * it returns a handle that does nothing until a daemon appears (it looks
 * again at most once a second).  Returns NULL only when out of memory. */
freeride_stage* freeride_stage_open(int lane, const char* socket_path);

/* 1 when a daemon's lane segment is mapped, 0 otherwise. */
int freeride_stage_attached(const freeride_stage* stage);

/* Marks the start of an idle period in schedule slot `slot`.
 * predicted_ns: the stage's own estimate of its length (0: let the daemon
 * learn it per slot).  free_memory_bytes: device memory the side tasks may use
 * now (UINT64_MAX: unknown).  No allocation; waits only for a mark of the
 * same stage written at that moment by another of its threads (a stream
 * mark's host function, the gated marks' thread), usually microseconds (a
 * mark that finds the lane's segment gone maps it again, at most once a
 * second). */
void freeride_bubble_begin(freeride_stage* stage, uint32_t slot, int64_t predicted_ns,
                           uint64_t free_memory_bytes);

/* Marks the end of the open idle period, as freeride_bubble_begin; a no-op
 * if none is open. */
void freeride_bubble_end(freeride_stage* stage);

/* Stream-ordered marks: enqueue the mark on a CUDA stream (a CUstream or
 * cudaStream_t, e.g. torch.cuda.current_stream().cuda_stream) so that it is
 * written when the GPU reaches that point of the stream, not when the CPU
 * issues it.  The mark is a host function (cuLaunchHostFunc) run by the CUDA
 * driver; its time is taken when it runs.  The CUDA driver is loaded at run
 * time, so this library has no CUDA dependency.  Return 0 when enqueued, -1
 * when no CUDA driver is usable (the caller may mark at once instead).
 * Never blocks on the daemon.  At most 1024 marks may be pending at once per
 * stage; beyond that the oldest pending records are reused. */
int freeride_bubble_begin_on_stream(freeride_stage* stage, void* cuda_stream, uint32_t slot,
                                    int64_t predicted_ns, uint64_t free_memory_bytes);
int freeride_bubble_end_on_stream(freeride_stage* stage, void* cuda_stream);

/* The lane's GPU gate (src/gate/gate_page.h).  Opens (closes) the gate when
 * `compute_stream` (the stage's own compute stream) reaches this point: one
 * stream memory write (cuStreamWriteValue32) to a page of host memory, or a
 * store from the host where the stream has no work left (below), so
 * the side tasks' GPU work, which waits on that word, starts within
 * microseconds of the bubble's begin and never after its end.  The stream
 * gains no host callback and no wait.  Call open where the bubble begins and
 * close where it ends, on the same stream, from the training thread, with a
 * CUDA context current (the first call registers the page with the driver).
 * Returns 0 when enqueued; -1 when there is no gate (no daemon, a CPU lane,
 * or no stream memory operations): side tasks are then served by host-side
 * dispatch alone.  Keep calling the host marks above as well: they carry the
 * slot and lengths the daemon learns from. */
int freeride_gate_open_on_stream(freeride_stage* stage, void* compute_stream);
int freeride_gate_close_on_stream(freeride_stage* stage, void* compute_stream);

/* Marks from the gate alone, the way to mark on a CUDA stage: the bubble
 * begins (ends) where `compute_stream` (the stage's own compute stream)
 * reaches this point.  One stream memory write (or host store, below) opens
 * (closes) the lane's GPU gate there, as freeride_gate_open_on_stream does; the stream gains no host
 * function and no wait, so a trainer that synchronises its device does not
 * wait for marks either.  A thread of libfreeride in this process reads the
 * gate word and writes the marks (with `slot`, `predicted_ns` and
 * `free_memory_bytes`, as freeride_bubble_begin) when it sees it change, up
 * to a poll interval late (FREERIDE_GATE_MARK_POLL_US, default 20, backing
 * off to 4 times that while the word stays the same).  A NULL stream is the
 * legacy default stream, as in CUDA.
 *
 * begin returns 0 when enqueued; -1 when there is no gate (no daemon, a CPU
 * lane, no stream memory operations, or FREERIDE_GATE_MARKS=0): then mark
 * with the _on_stream calls above, or at once.  end returns 0 when enqueued;
 * -1 when the close could not be enqueued (the bubble is then ended from the
 * host) or no gated mark was made yet.  end_gated_on_host ends the open
 * gated bubble from the host, with no stream write: for a context too
 * broken to name a stream.  A bubble ended from the host is ended as soon as
 * the thread sees it begin (at once if it has), and the thread closes its
 * gate (a compare-and-swap on the word) once the word shows it open.
 *
 * Call both from the training thread, with a CUDA context current; once a
 * mark was gated, make this stage's marks with these calls only (the thread
 * keeps its own count of the gate's bubbles).  A forked child's calls do
 * nothing (-1): the thread and the lane are its parent's. */
int freeride_bubble_begin_gated(freeride_stage* stage, void* compute_stream, uint32_t slot,
                                int64_t predicted_ns, uint64_t free_memory_bytes);
int freeride_bubble_end_gated(freeride_stage* stage, void* compute_stream);
void freeride_bubble_end_gated_on_host(freeride_stage* stage);

/* How the gate calls above (open, close, begin_gated, end_gated) write the
 * gate word.  AUTO, the default: from the host at once when `compute_stream`
 * has no work left (cuStreamQuery) and every stream write since the last
 * host store went on that same stream (the GPU is already at that point,
 * so no earlier value can land after it, and the stream is spared the
 * write: microseconds of stream time, which a trainer that synchronises its
 * device after every exchange waits for), else as a stream memory write.
 * Never while the stream is being captured into a graph (it is not asked);
 * and once the stage wrote on two different streams, or into a graph being
 * captured, always on the stream (an earlier write could land after a host
 * store).
 * STREAM: always a stream memory write.  MEMSET: as AUTO, but a stream write
 * is a 4-byte cuMemsetD32Async, a kernel with no memory barrier (an
 * experiment; under MPS a kernel may wait for SMs that side kernels hold,
 * so the close may come later than a memory write's).  Another mode
 * leaves the mode as it was.  FREERIDE_GATE_WRITES=auto|stream|memset in the environment
 * when the stage is opened sets it too.  gate_writes reports how many writes
 * went on a stream and from the host.  Training thread. */
enum freeride_gate_write_mode {
  FREERIDE_GATE_WRITE_AUTO = 0,
  FREERIDE_GATE_WRITE_STREAM = 1,
  FREERIDE_GATE_WRITE_MEMSET = 2,
};
void freeride_stage_set_gate_writes(freeride_stage* stage, int mode);
void freeride_stage_gate_writes(const freeride_stage* stage, uint64_t* on_stream, uint64_t* from_host);

/* Closes the bubble if open and releases the handle.  NULL is allowed.  With
 * stream-ordered or gated marks, synchronise the stream first: pending marks
 * refer to the handle (the gated marks' thread reads the word once more,
 * writes what it shows, and is joined). */
void freeride_stage_close(freeride_stage* stage);

/* ------------------------------------------------------------------------
 * Side-task side: grants from the lane dispatcher.
 *
 * Threads: a freeride_task is used from one thread at a time (the one that
 * steps): its calls share one grant's state.  Two threads stepping on one
 * handle record steps the daemon judges against one grant, and the task is
 * killed for overrunning its bubbles.  freeride_task_announce is the one
 * call for any thread.  Every call takes a NULL task and does nothing.
 * ------------------------------------------------------------------------ */
typedef struct freeride_task freeride_task;

/* Tells the daemon that launched this process that it uses the SDK, so that
 * the daemon stops holding it to bubbles and lets it initialise (a program
 * that never says so runs only inside bubbles, then fails).  Call it first
 * thing, before slow imports; freeride_task_attach says it too.  Returns 1
 * when a daemon's segment was found, 0 otherwise (not launched by a daemon).
 * Any thread. */
int freeride_task_announce(void);

/* Attaches to the control segment the daemon gave this process (through the
 * FREERIDE_TASK_SEGMENT environment variable).  Returns NULL when the process
 * was not launched by a daemon; then, if error is not NULL, a reason is
 * written to it (at most error_len bytes, NUL-terminated). */
freeride_task* freeride_task_attach(char* error, size_t error_len);

/* Declares the unit of work reported by steps, e.g. "edges" (31 chars max). */
void freeride_task_set_unit(freeride_task* task, const char* unit);

/* Declares init() done: the task may now be granted bubbles. */
void freeride_task_ready(freeride_task* task);

/* Waits for the next grant.  Returns 1 when granted, 0 on timeout, -1 when
 * the daemon asks the task to stop (cancel), 2 when it asks for a
 * checkpoint.  timeout_ns < 0 waits forever.  A NULL task returns -1 at
 * once: there is nothing to wait for (0 made a loop until -1 spin). */
int freeride_task_wait_grant(freeride_task* task, int64_t timeout_ns);

/* 1 when the current grant holds, its bubble is still open, and a step of the
 * learned length fits before the predicted end.  Read the step's start time
 * before this call, so that the recorded start lies inside the bubble. */
int freeride_task_next_step_fits(freeride_task* task);

/* After next_step_fits returned 0, once per bubble: 1 when the bubble turned
 * out to be of its slot's long kind and a step fits the longer forecast.
 * The daemon publishes, for a slot of short and long bubbles, the point just
 * past the short ones; this call sleeps until then (a begin mark cuts it
 * short) and checks that the bubble is still open.  On 1, read a new start
 * time and call next_step_fits again; on 0, yield. */
int freeride_task_second_look(freeride_task* task);

/* Records one step that ran from start_ns to end_ns and did `units` of work;
 * feeds the step-time estimate. */
void freeride_task_record_step(freeride_task* task, int64_t start_ns, int64_t end_ns,
                               double units);

/* Adds progress without a step boundary (imperative tasks). */
void freeride_task_add_progress(freeride_task* task, double units);

/* Hands the grant back to the dispatcher, after a step that did not fit. */
void freeride_task_yield(freeride_task* task);

/* Hands the grant back because the task has nothing to do now (a server
 * with no request): the rest of the bubble goes to any other task, not only
 * to one whose steps are shorter than this task's. */
void freeride_task_yield_idle(freeride_task* task);

/* The learned step time in nanoseconds (0 before the first step). */
int64_t freeride_task_step_estimate_ns(const freeride_task* task);

/* Directory where the task may keep its checkpoint across restarts; it
 * exists.  Valid until freeride_task_detach. */
const char* freeride_task_checkpoint_dir(const freeride_task* task);

/* Reports the end of the task: ok != 0 for success.  Hands the bubble back
 * too, leaving the rest to any other task (as freeride_task_yield_idle).
 * Call it once the work and its results are saved: a process that dies
 * after a success reported here is FINISHED, not run again (its
 * checkpoint, if any, is taken to be deleted). */
void freeride_task_finished(freeride_task* task, int ok);

/* Releases the handle.  NULL is allowed. */
void freeride_task_detach(freeride_task* task);

/* An iterative side task written in another language (the Python SDK binds
 * its IterativeTask to this).  Every hook gets `user`; hooks other than step
 * may be NULL.  init, step, pause, resume and finish return 0 on success;
 * any other value stops the run, and error(), if set, says why.  save and
 * restore return 1 when they wrote or read the checkpoint at `path`. */
typedef struct freeride_iterative_task {
  void* user;
  const char* unit; /* e.g. "tokens"; NULL: "steps" */
  int (*init)(void* user);
  int (*step)(void* user, double* units, int* done);
  int (*pause)(void* user);
  int (*resume)(void* user);
  int (*finish)(void* user);
  int (*save)(void* user, const char* path);
  int (*restore)(void* user, const char* path);
  uint64_t (*peak_memory_bytes)(void* user);
  const char* (*error)(void* user);
} freeride_iterative_task;

/* Runs the task exactly as the C++ SDK's RunIterativeTask does: under the
 * daemon that launched this process (steps inside grants, checkpoints),
 * else alone, printing the standalone JSON line.  standalone != 0 runs
 * alone regardless; seconds > 0 bounds a standalone run.  Without a
 * daemon, FREERIDE_STANDALONE_SECONDS (`freeride task-profile`'s) runs it
 * alone for that long too.  Returns the process exit status. */
int freeride_run_iterative_task(const freeride_iterative_task* task, int standalone,
                                double seconds);

/* Inside a step hook run by freeride_run_iterative_task, on its thread: the
 * longest the step may take and still fit the rest of its grant
 * (freeride::StepBudgetNs in freeride/task.h); INT64_MAX when running
 * alone, 0 outside a step or on another thread. */
int64_t freeride_step_budget_ns(void);

/* Inside a step hook: the step did `parts` parts of the task's grain
 * (freeride::StepResult::parts), planned to freeride_step_budget_ns().
 * Applies to the step running on the calling thread; 1 unless called. */
void freeride_step_parts(int parts);

/* Inside a step hook: the step found nothing to do now (freeride::StepResult::idle,
 * e.g. a server whose next request has not come).  The runner records no
 * step and hands the bubble back; the task is granted again later.  Applies
 * to the step running on the calling thread. */
void freeride_step_idle(void);

#ifdef __cplusplus
}
#endif

#endif /* FREERIDE_FREERIDE_H_ */
