"""`cmake --install` to a fresh prefix: the installed `freeride demo` finds its
files there, and the installed Python package loads the installed
libfreeride, with nothing from the build or source tree on its paths."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def prefix(build_dir, tmp_path_factory) -> Path:
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    p = subprocess.run([shutil.which("cmake") or "cmake", "--install", str(build_dir), "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return prefix


def clean_env(prefix: Path) -> dict[str, str]:
    """The environment of a user of the install: its bin/ on PATH, nothing of the build."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FREERIDE_") and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PATH"] = f"{prefix / 'bin'}:/usr/bin:/bin"
    return env


def test_the_install_has_binaries_library_headers_and_python_package(prefix):
    for f in ["bin/freeride", "bin/freeride-pagerank", "bin/freeride-sgd", "bin/freeride-image",
              "bin/example_stage_replay", "lib/libfreeride.so", "include/freeride/freeride.h",
              "include/freeride/task.h", "share/freeride/python/freeride/__init__.py",
              "share/freeride/python/freeride/py.typed", "share/freeride/examples/train_gpt_pipeline.py",
              "share/freeride/examples/data/h200_1f1b_bubbles.json", "bin/freeride-slurm",
              "share/freeride/deploy/slurm/train.sbatch"]:
        assert (prefix / f).exists(), f"{f} is not installed"
    assert os.access(prefix / "bin" / "freeride-slurm", os.X_OK), "freeride-slurm is not executable"


def test_the_installed_demo_runs_from_the_prefix(prefix, tmp_path):
    out = tmp_path / "demo"
    env = dict(clean_env(prefix), FREERIDE_PYTHON=sys.executable)
    # Its tasks at the normal policy, so that they harvest on a busy machine too (conftest.NORMAL_CPU_TASKS).
    p = subprocess.run([str(prefix / "bin" / "freeride"), "demo", "--quick", "--mode", "replay", "--out",
                        str(out), "--cpu-task-priority", "normal"], capture_output=True, text=True, env=env,
                       cwd="/", timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "replay mode" in p.stdout.splitlines()[0]
    report = json.loads((out / "report.json").read_text())
    assert report["total"]["harvested_ns"] > 0, "side tasks harvested nothing"


def test_the_installed_python_package_loads_the_installed_library(prefix):
    env = dict(clean_env(prefix), PYTHONPATH=str(prefix / "share" / "freeride" / "python"))
    code = ("import freeride, freeride._native as n; lib = freeride.load_library(); "
            "print(freeride.__file__); print(n.loaded_path())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/",
                       timeout=60)
    assert p.returncode == 0, p.stderr
    package, library = p.stdout.split()
    assert Path(package).resolve().is_relative_to(prefix.resolve()), package
    assert Path(library).resolve() == (prefix / "lib" / "libfreeride.so").resolve(), library
