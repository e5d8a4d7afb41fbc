"""The work bench/ray_process_model_gpu.py sends to its side tasks (importable by the runner, so
that it travels by reference when cloudpickle is not installed)."""
from __future__ import annotations


def gpu_chunks(seed: int, chunks: int, size: int, device: str = "cuda"):
    """`chunks` steps of one size x size product each, the device synchronised at each step's end
    (the step has then really ended); returns the products done and a checksum."""
    import torch
    generator = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(size, size, generator=generator).to(device)
    b = torch.randn(size, size, generator=generator).to(device) / size ** 0.5
    for _ in range(chunks):
        a = torch.tanh(a @ b)
        if device == "cuda":
            torch.cuda.synchronize()
        yield 1
    return {"seed": seed, "products": chunks, "checksum": float(a.sum())}
