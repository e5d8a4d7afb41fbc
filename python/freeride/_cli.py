"""The `freeride` command of a wheel: runs the CLI the wheel carries.

pip puts this entry point on PATH; the real program is the executable in
this package's _bin folder (scripts/wheel.sh puts it there, with the daemon,
the built-in tasks and the examples beside it).  It replaces this process,
so signals, the exit status and the terminal are the program's own.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def executable() -> Path:
    """The packaged `freeride` executable (it may not exist: see main)."""
    return Path(__file__).resolve().parent / "_bin" / "freeride"


def main() -> int:
    program = executable()
    if not os.access(program, os.X_OK):
        print(f"freeride: {program} is missing or not executable: this freeride package was not "
              "installed from a FreeRide wheel (scripts/wheel.sh makes one), so it holds only the "
              "Python SDK", file=sys.stderr)
        return 2
    # `freeride demo` and `freeride doctor` run Python: the one this package
    # was installed for, unless the user chose another.
    os.environ.setdefault("FREERIDE_PYTHON", sys.executable)
    os.execv(program, [str(program), *sys.argv[1:]])
    return 2  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
