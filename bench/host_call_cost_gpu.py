#!/usr/bin/env python3
"""What each host call on the marks' path costs the training thread, one at a time, on one GPU.

    python3 bench/host_call_cost_gpu.py --out $OUT [--calls 20000]

A trainer that synchronises its device after every exchange (megatron-core's batched p2p,
DeepSpeed) waits for whatever its host does between the wait's return and its next launch, so
each call the marks make there is paid in full (bench/marks_cost_gpu.py shows the sum per
variant).  This times the parts alone, each in a loop of --calls calls on an idle stream, the
median of 5 runs, in microseconds per call:

- torch.cuda.current_stream(device).cuda_stream, and the raw handle
  (torch._C._cuda_getCurrentRawStream), which freeride._marks asks for instead;
- the driver calls of the stage's gate writes (src/channel/stream_marks.cc): cuStreamIsCapturing,
  cuThreadExchangeStreamCaptureMode (twice: the relaxed mode and back), cuStreamQuery,
  cuStreamWriteValue32 to a registered host word (then a synchronize every 64, not timed apart);
- a ctypes call that does nothing (libc's getpid), the floor of any call into libfreeride.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import statistics
import sys
import time


def per_call_us(fn, calls: int, runs: int = 5) -> float:
    """The median over `runs` of the mean time of one fn() over `calls` calls, in microseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter_ns() - start) / calls / 1e3)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--calls", type=int, default=20000)
    a = p.parse_args()
    if a.calls < 100:
        raise SystemExit("--calls: at least 100")
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this measures the driver's host calls on a GPU")
    device = torch.device("cuda", 0)
    torch.cuda.init()
    stream = torch.cuda.Stream(device)
    handle = ctypes.c_void_p(stream.cuda_stream)
    cuda = ctypes.CDLL("libcuda.so.1")
    libc = ctypes.CDLL(None)
    status = ctypes.c_int(0)
    mode = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
    # A registered host word, as the gate page is (cuMemHostRegister, device-mapped).
    page = mmap.mmap(-1, 4096)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    if cuda.cuMemHostRegister_v2(ctypes.c_void_p(address), ctypes.c_size_t(4096), ctypes.c_uint(3)) != 0:
        raise SystemExit("cuMemHostRegister failed")
    word = ctypes.c_uint64(0)
    if cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(word), ctypes.c_void_p(address), ctypes.c_uint(0)) != 0:
        raise SystemExit("cuMemHostGetDevicePointer failed")
    writes = [0]

    def write_value() -> None:
        cuda.cuStreamWriteValue32_v2(handle, word, ctypes.c_uint32(writes[0] & 0xffff), ctypes.c_uint(0))
        writes[0] += 1
        if writes[0] % 64 == 0:
            stream.synchronize()

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    parts = {
        "ctypes call that does nothing (getpid)": lambda: libc.getpid(),
        "torch.cuda.current_stream(device).cuda_stream": lambda: torch.cuda.current_stream(device).cuda_stream,
        "torch._C._cuda_getCurrentRawStream(index)": (lambda: raw(0)) if raw else None,
        "cuStreamIsCapturing": lambda: cuda.cuStreamIsCapturing(handle, ctypes.byref(status)),
        "cuThreadExchangeStreamCaptureMode": lambda: cuda.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)),
        "cuStreamQuery (idle stream)": lambda: cuda.cuStreamQuery(handle),
        "cuStreamWriteValue32 (registered host word)": write_value,
    }
    results = {}
    for name, fn in parts.items():
        if fn is None:
            results[name] = None
            print(f"{name:48s} (not in this torch)", flush=True)
            continue
        fn()
        us = per_call_us(fn, a.calls)
        results[name] = us
        print(f"{name:48s} {us:7.3f} us a call", flush=True)
    stream.synchronize()
    cuda.cuMemHostUnregister(ctypes.c_void_p(address))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "host_call_cost.json"), "w") as f:
        json.dump({"command": " ".join(sys.argv), "torch": torch.__version__, "calls": a.calls,
                   "gpu": torch.cuda.get_device_name(device), "us_per_call": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
