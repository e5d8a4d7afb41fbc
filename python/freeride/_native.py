"""Loads libfreeride and declares the C ABI (include/freeride/freeride.h)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path

ABI_VERSION = 4
_LIB_NAME = "libfreeride.so"


class FreeRideUnavailable(RuntimeError):
    """libfreeride could not be found or loaded."""


def _candidates() -> list[Path]:
    """Where libfreeride.so may be, in the order tried."""
    here = Path(__file__).resolve().parent
    paths: list[Path] = []
    if os.environ.get("FREERIDE_LIB"):
        paths.append(Path(os.environ["FREERIDE_LIB"]))
    # A wheel (scripts/wheel.sh) carries the library under its soname, the
    # name its executables ask the loader for.
    paths.append(here / "_lib" / (_LIB_NAME + ".0"))
    if os.environ.get("FREERIDE_HOME"):
        paths.append(Path(os.environ["FREERIDE_HOME"]) / "lib" / _LIB_NAME)
    # An install or a bundle: PREFIX/share/freeride/python/freeride -> PREFIX/lib.
    if len(here.parents) > 3:
        paths.append(here.parents[3] / "lib" / _LIB_NAME)
    # The freeride on PATH: an install's or bundle's bin/ (library in ../lib),
    # or a build tree (library beside it).
    exe = shutil.which("freeride")
    if exe:
        real = Path(exe).resolve()
        paths += [real.parent.parent / "lib" / _LIB_NAME, real.parent / _LIB_NAME]
    return paths


_lib: ctypes.CDLL | None = None
_lib_path: str | None = None


def load_library() -> ctypes.CDLL:
    """Returns the loaded library; raises FreeRideUnavailable saying where it looked."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.is_file():
            lib = ctypes.CDLL(str(path))
            found = str(path)
            break
    else:
        system = ctypes.util.find_library("freeride")
        if not system:
            raise FreeRideUnavailable(
                "libfreeride.so not found (looked at: " + ", ".join(tried) + ", and the system "
                "library path); put the freeride binary on PATH, or set FREERIDE_LIB to the file "
                "or FREERIDE_HOME to an install or bundle")
        lib = ctypes.CDLL(system)
        found = system
    # The version first: a library of another ABI may lack functions _declare names.
    lib.freeride_abi_version.restype = ctypes.c_int
    lib.freeride_abi_version.argtypes = []
    if lib.freeride_abi_version() != ABI_VERSION:
        raise FreeRideUnavailable(
            f"libfreeride ABI {lib.freeride_abi_version()} at {found}, this package needs {ABI_VERSION}")
    _declare(lib)
    _lib, _lib_path = lib, found
    return lib


def loaded_library() -> ctypes.CDLL | None:
    """The library load_library() loaded; None before it has (no run is in progress)."""
    return _lib


def loaded_path() -> str | None:
    """The file load_library() loaded; None before it has."""
    return _lib_path


def _declare(lib: ctypes.CDLL) -> None:
    c = ctypes
    lib.freeride_task_announce.argtypes = []
    lib.freeride_task_announce.restype = c.c_int
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
        "freeride_bubble_begin_gated": (c.c_int, [stage, c.c_void_p, c.c_uint32, c.c_int64, c.c_uint64]),
        "freeride_bubble_end_gated": (c.c_int, [stage, c.c_void_p]),
        "freeride_bubble_end_gated_on_host": (None, [stage]),
        "freeride_gate_open_on_stream": (c.c_int, [stage, c.c_void_p]),
        "freeride_gate_close_on_stream": (c.c_int, [stage, c.c_void_p]),
        "freeride_stage_set_gate_writes": (None, [stage, c.c_int]),
        "freeride_stage_gate_writes": (None, [stage, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64)]),
        "freeride_stage_close": (None, [stage]),
        "freeride_run_iterative_task": (c.c_int, [c.c_void_p, c.c_int, c.c_double]),
        "freeride_step_budget_ns": (c.c_int64, []),
        "freeride_step_parts": (None, [c.c_int]),
        "freeride_step_idle": (None, []),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
