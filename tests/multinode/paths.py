"""Where a daemon's shared-memory segments live, as src/base/paths.cc names them.

Both sides derive a lane's segment from the daemon's socket path:
/dev/shm/freeride-<uid>-<48 bits of FNV-1a of the socket path>-lane<k>.  The
nodes of one machine share /dev/shm, so nodes whose daemons have distinct
sockets have distinct segments, and the harness checks that they do.
"""
from __future__ import annotations

import os


def fnv1a64(text: str) -> int:
    value = 1469598103934665603
    for byte in text.encode():
        value = ((value ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return value


def segment_prefix(socket: str) -> str:
    return f"/dev/shm/freeride-{os.getuid()}-{fnv1a64(socket) & 0xFFFFFFFFFFFF:012x}"


def lane_segment_path(socket: str, lane: int) -> str:
    return f"{segment_prefix(socket)}-lane{lane}"
