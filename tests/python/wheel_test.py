"""The wheel (scripts/wheel.sh, as the python_wheel target runs it), installed
with pip into a fresh virtual environment: `freeride` is on that
environment's PATH, every library its executables need is inside the wheel
or one the manylinux policy promises, and `freeride doctor` and `freeride
demo` run from it with nothing of the build or source tree on any path."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import assert_harvested_or_said_why, require_torch

EXECUTABLES = ["freeride", "freeride-pagerank", "freeride-sgd", "freeride-image", "freeride-tasks-check",
               "example_count_task", "example_imperative_loop", "example_stage_replay"]
# What a manylinux wheel may take from the node (the policy's libraries).
SYSTEM = re.compile(r"^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s\.|"
                    r"libstdc\+\+\.|libz\.)")


@pytest.fixture(scope="module")
def wheel(build_dir) -> Path:
    p = subprocess.run(["cmake", "--build", str(build_dir), "--target", "python_wheel"], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    wheels = sorted((build_dir / "dist").glob("freeride-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh environment with the wheel installed by pip, from the file alone."""
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-deps",
                        "--disable-pip-version-check", str(wheel)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return venv


def user_env(venv: Path, home: Path) -> dict[str, str]:
    """A user of the environment: its bin/ on PATH; nothing of the build, the
    source tree or the test's own Python."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FREERIDE_", "VIRTUAL_ENV")) and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", HOME=str(home))
    return env


def package_dir(venv: Path) -> Path:
    [package] = venv.glob("lib/python3*/site-packages/freeride")
    return package


def test_the_wheel_is_manylinux_and_carries_everything(wheel):
    assert re.fullmatch(r"freeride-0\.1\.0-py3-none-manylinux_2_\d+_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = z.read("freeride-0.1.0.dist-info/entry_points.txt").decode()
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    for exe in EXECUTABLES:
        assert f"freeride/_bin/{exe}" in names, exe
        assert modes[f"freeride/_bin/{exe}"] & 0o111, f"{exe} is not executable in the wheel"
    assert {"freeride/_lib/libfreeride.so.0", "freeride/__init__.py", "freeride/py.typed",
            "freeride/_cli.py", "freeride/torch.py", "freeride/deepspeed.py", "freeride/megatron.py",
            "freeride/_share/examples/train_gpt_pipeline.py",
            "freeride/_share/examples/data/h200_1f1b_bubbles.json"} <= names
    vendored = [n.split("/")[1] for n in names if n.startswith("freeride.libs/")]
    for library in ("libgrpc++", "libprotobuf", "libsqlite3", "libfmt"):
        assert any(v.startswith(library) for v in vendored), f"{library} is not vendored: {vendored}"
    assert not any(v.startswith("libcuda.") for v in vendored), "the driver comes from the node"
    assert re.search(r"^freeride = freeride\._cli:main$", entry_points, re.M), entry_points


def test_every_library_resolves_inside_the_wheel_or_the_policy(venv, tmp_path):
    env = user_env(venv, tmp_path)
    site = package_dir(venv).parent
    # Every ELF file the wheel carries: its programs (freeride-slurm is a script) and libraries.
    carried = sorted((site / "freeride" / "_bin").iterdir()) + sorted((site / "freeride" / "_lib").iterdir())
    elves = [f for f in carried if f.is_file() and f.read_bytes()[:4] == b"\x7fELF"]
    assert {"freeride", "libfreeride.so.0", "libfreeride_gate.so"} <= {f.name for f in elves}, elves
    for f in elves:
        p = subprocess.run(["ldd", str(f)], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, p.stderr
        for line in p.stdout.splitlines():
            name, arrow, where = line.strip().partition(" => ")
            if not arrow or SYSTEM.match(name):  # the vDSO and the loader have no "=>"
                continue
            assert "not found" not in where, f"{f.name}: {line}"
            path = where.split(" (")[0]
            assert Path(path).resolve().is_relative_to(site.resolve()), f"{f.name} takes {name} from {path}"


def test_freeride_is_on_the_environments_path_and_doctor_finds_the_wheel(venv, tmp_path):
    env = user_env(venv, tmp_path)
    assert (venv / "bin" / "freeride").is_file(), "pip made no freeride command"
    p = subprocess.run(["freeride", "--version"], capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "freeride 0.1.0", p.stdout + p.stderr
    p = subprocess.run(["freeride", "doctor"], capture_output=True, text=True, env=env, cwd="/", timeout=300)
    package = package_dir(venv)
    assert p.returncode == 0, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert f"from the wheel installed at {package}" in first, first
    # The Python package of the wheel, with the wheel's library, in the environment's Python.
    line = next(l for l in p.stdout.splitlines() if "python package" in l)
    assert line.split()[0] == "ok", line
    assert f"{package}/__init__.py" in line and f"{package}/_lib/libfreeride.so.0" in line, line
    assert "nothing blocks FreeRide" in p.stdout


def run_demo(venv: Path, home: Path, mode: str, extra_env: dict[str, str] | None = None):
    out = home / f"demo-{mode}"
    env = dict(user_env(venv, home), **(extra_env or {}))
    # The sizes and task priority the source tree's demo test uses (tests/python/demo_test.py):
    # --quick's 30 steps can end on a loaded 2-core machine before a side task was served, and
    # a SCHED_IDLE task can get no core there at all.
    p = subprocess.run(["freeride", "demo", "--mode", mode, "--out", str(out), "--steps", "40",
                        "--profile-seconds", "1", "--cpu-task-priority", "normal"],
                       capture_output=True, text=True, env=env, cwd="/", timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout, json.loads((out / "report.json").read_text())


def test_the_demo_runs_from_the_wheel_in_replay_mode(venv, tmp_path):
    stdout, report = run_demo(venv, tmp_path, "replay")
    assert "replay mode" in stdout.splitlines()[0], stdout[:500]
    assert report["total"]["harvested_ns"] > 0, "side tasks harvested nothing"


def test_the_demo_runs_from_the_wheel_in_cpu_mode(venv, tmp_path):
    """CPU mode needs PyTorch: the test's own torch is lent to the environment
    through a .pth line, after the environment's own packages (so the
    freeride package is still the wheel's)."""
    require_torch()
    import torch
    torch_site = Path(torch.__file__).resolve().parents[1]
    [site] = venv.glob("lib/python3*/site-packages")
    (site / "lent_torch.pth").write_text(f"{torch_site}\n")
    try:
        stdout, report = run_demo(venv, tmp_path, "cpu")
    finally:
        (site / "lent_torch.pth").unlink()
    assert "CPU mode" in stdout.splitlines()[0], stdout[:500]
    assert_harvested_or_said_why(tmp_path / "demo-cpu", report)
