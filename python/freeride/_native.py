"""Loads libfreeride and declares the C ABI (include/freeride/freeride.h)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path

ABI_VERSION = 1
_LIB_NAME = "libfreeride.so"


class FreeRideUnavailable(RuntimeError):
    """libfreeride could not be found or loaded."""


def _candidates() -> list[Path]:
    paths: list[Path] = []
    if os.environ.get("FREERIDE_LIB"):
        paths.append(Path(os.environ["FREERIDE_LIB"]))
    if os.environ.get("FREERIDE_HOME"):
        paths.append(Path(os.environ["FREERIDE_HOME"]) / "lib" / _LIB_NAME)
    exe = shutil.which("freeride")
    if exe:
        real = Path(exe).resolve()
        paths += [real.parent.parent / "lib" / _LIB_NAME, real.parent / _LIB_NAME]
    # Running from the source tree: python/freeride/_native.py -> build/.
    paths.append(Path(__file__).resolve().parents[2] / "build" / _LIB_NAME)
    return paths


_lib = None


def load_library() -> ctypes.CDLL:
    """Returns the loaded library; raises FreeRideUnavailable saying where it looked."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.is_file():
            lib = ctypes.CDLL(str(path))
            break
    else:
        found = ctypes.util.find_library("freeride")
        if not found:
            raise FreeRideUnavailable(
                "libfreeride.so not found (looked at: " + ", ".join(tried) + ", and the system "
                "library path); set FREERIDE_LIB to the file or FREERIDE_HOME to a bundle")
        lib = ctypes.CDLL(found)
    _declare(lib)
    if lib.freeride_abi_version() != ABI_VERSION:
        raise FreeRideUnavailable(
            f"libfreeride ABI {lib.freeride_abi_version()}, this package needs {ABI_VERSION}")
    _lib = lib
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    stage = c.c_void_p
    signatures = {
        "freeride_abi_version": (c.c_int, []),
        "freeride_now_ns": (c.c_int64, []),
        "freeride_stage_open": (stage, [c.c_int, c.c_char_p]),
        "freeride_stage_attached": (c.c_int, [stage]),
        "freeride_bubble_begin": (None, [stage, c.c_uint32, c.c_int64, c.c_uint64]),
        "freeride_bubble_end": (None, [stage]),
        "freeride_bubble_begin_on_stream": (c.c_int, [stage, c.c_void_p, c.c_uint32, c.c_int64,
                                                      c.c_uint64]),
        "freeride_bubble_end_on_stream": (c.c_int, [stage, c.c_void_p]),
        "freeride_stage_close": (None, [stage]),
        "freeride_run_iterative_task": (c.c_int, [c.c_void_p, c.c_int, c.c_double]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
