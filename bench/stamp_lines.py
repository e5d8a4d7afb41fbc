#!/usr/bin/env python3
"""Runs a program and prints each line it writes, on either output, to standard output with
" at UNIX_TIME" appended: the time the line was read.

    python3 bench/stamp_lines.py -- freeride-pagerank --rmat-scale 22 --device cuda

bench/gate_gpu.py values a program's progress lines by the time on each ("... at 1733583600.123");
the built-in tasks print theirs without one ("pagerank: iteration 24, L1 change 1.1e-15", on
standard error, unbuffered), so they run under this wrapper.  A line is stamped when it arrives,
so a program that buffers its output would be stamped late: the built-in tasks do not.

The program dies with this wrapper (PR_SET_PDEATHSIG), whoever kills it, so a benchmark that
kills the wrapper leaves no GPU work running; SIGINT and SIGTERM are passed on.  The wrapper exits
with the program's status (128 + N for a signal N).
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: killed when the wrapper goes, however it goes."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: stamp_lines.py -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    except OSError as e:
        print(f"stamp_lines.py: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
        return 127
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _frame: child.send_signal(s))
    lock = threading.Lock()

    def stamp(stream) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            with lock:
                sys.stdout.write(f"{line} at {time.time():.6f}\n")
                sys.stdout.flush()

    readers = [threading.Thread(target=stamp, args=(s,), daemon=True) for s in (child.stdout, child.stderr)]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
