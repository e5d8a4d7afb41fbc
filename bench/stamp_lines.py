#!/usr/bin/env python3
"""Runs a program and prints each line it writes, on either output, to standard output with
" at UNIX_TIME" appended: the time the line was read.

    python3 bench/stamp_lines.py -- freeride-pagerank --rmat-scale 22 --device cuda

bench/gate_gpu.py values a program's progress lines by the time on each ("... at 1733583600.123");
the built-in tasks print theirs without one ("pagerank: iteration 24, L1 change 1.1e-15", on
standard error, unbuffered), so they run under this wrapper.  A line is stamped when it arrives,
so a program that buffers its output would be stamped late: the built-in tasks do not.  Both
outputs go to standard output, because the bench reads progress there (so the program's own
standard error is empty to whoever runs the wrapper).  Lines pass as bytes, whatever their
encoding.

The program dies with this wrapper (PR_SET_PDEATHSIG: the program itself, not what it starts),
whoever kills it, so a benchmark that kills the wrapper leaves no GPU work running; SIGINT and
SIGTERM are passed on.  When the reader of its output goes away (a closed pipe), the program is
killed, as a shell pipeline's writer is.  The wrapper exits with the program's status (128 + N
for a signal N).
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In the child, before exec: killed when the wrapper goes, however it goes (and at once if
    it went before the request was made)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: stamp_lines.py -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    me = os.getpid()
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=lambda: die_with_parent(me))
    except OSError as e:
        print(f"stamp_lines.py: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
        return 127
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _frame: child.send_signal(s))
    lock = threading.Lock()
    out = sys.stdout.buffer
    reader_gone = threading.Event()

    def stamp(stream) -> None:
        # Reads to the end whatever happens to the writes, so the program never blocks on a
        # full pipe of ours.
        for raw in iter(stream.readline, b""):
            if reader_gone.is_set():
                continue
            line = raw.rstrip(b"\r\n")
            try:
                with lock:  # stamped under the lock too: the times on the output rise
                    out.write(line + f" at {time.time():.6f}\n".encode())
                    out.flush()
            except OSError:  # the reader closed its end
                reader_gone.set()
                child.kill()

    readers = [threading.Thread(target=stamp, args=(s,), daemon=True) for s in (child.stdout, child.stderr)]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    code = child.wait()
    if reader_gone.is_set():
        # Nothing more can be written; leave without flushing into the closed pipe.
        os._exit(128 + signal.SIGPIPE)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
