"""Warnings given once per process, and release series: what the framework integrations and
freeride.ray share to say that an installed version is not the one FreeRide was tested with.
Imports nothing heavy (no torch), so that freeride.ray can use it too."""
from __future__ import annotations

import threading
import warnings

_warned: set = set()
_warned_lock = threading.Lock()


def warn_once(key, message: str, stacklevel: int = 3) -> bool:
    """Warns `message` the first time `key` is seen in this process; True if it warned."""
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(message, stacklevel=stacklevel)
    return True


def version_tuple(version: str) -> tuple:
    """'0.19.8' -> (0, 19, 8); stops at the first part that is not a number ('0.16.1rc1' -> (0, 16))."""
    parts = []
    for part in version.split("+")[0].split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def tested(version: str, tested_series: tuple) -> bool:
    """True when `version` is in the tested release series, e.g. (0, 19) for 0.19.x."""
    return version_tuple(version)[:len(tested_series)] == tested_series
