"""Messages between a Ray worker and the side task that runs its work: pickles (cloudpickle,
so that functions and classes defined in a driver script travel by value; without it, plain
pickle, and then they must be importable), each behind its length, over a Unix stream socket.  The socket is also how each side learns that the other
has gone: a closed connection.

Wrapper to runner: ("start", Work), then ("call", call_id, method, args, kwargs) ...
Runner to wrapper: ("ready", pid) or ("failed", exception, traceback_text) after the start;
("result", call_id, value) or ("error", call_id, exception, traceback_text) for each call.
"""
from __future__ import annotations

import pickle
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

try:
    import cloudpickle as _pickler
except ImportError:  # freeride[ray] installs it; Ray itself does not
    _pickler = pickle

_HEADER = struct.Struct("!Q")


class Closed(ConnectionError):
    """The other side closed the connection (or its process ended)."""


@dataclass
class Work:
    """What a side task runs.  kind: "function" (one call, `call`), "actor" (an instance of
    `target` built with `args`, then calls), or "batches" (a Ray Data UDF: a function, or a class
    built with `args`; each call is a batch, done `rows_per_step` rows per step)."""
    kind: str
    target: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    unit: str = "steps"
    rows_per_step: int = 0
    call: tuple | None = None  # ("call", 0, None, args, kwargs) for kind "function"


def send(sock: socket.socket, message: tuple) -> None:
    data = _pickler.dumps(message)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise Closed("the connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket) -> tuple:
    """The next message; raises Closed when the other side has gone."""
    try:
        (length,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
        return pickle.loads(_read_exactly(sock, length))
    except (ConnectionResetError, BrokenPipeError) as e:
        raise Closed(str(e)) from None


def portable_exception(e: BaseException) -> BaseException:
    """`e` if it pickles, else a RuntimeError that names it (the other side may lack its class)."""
    try:
        pickle.loads(_pickler.dumps(e))
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")
