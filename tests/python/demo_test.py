"""`freeride demo` end to end from the build tree: CPU mode (real PyTorch) when
the test Python has torch, and replay mode, each writing its report, SVG and
Perfetto trace.  Usage: demo_test.py BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

build = sys.argv[1]
freeride = os.path.join(build, "freeride")
try:
    import torch  # noqa: F401
    modes = ["cpu", "replay"]
except ImportError:
    modes = ["replay"]
    print("torch is missing: checking replay mode only")

for mode in modes:
    out = os.path.join(tempfile.mkdtemp(prefix="demo-test-"), "out")
    env = dict(os.environ, FREERIDE_PYTHON=sys.executable)
    # From another working directory: the demo finds its parts from the executable.
    p = subprocess.run([freeride, "demo", "--mode", mode, "--out", out, "--steps", "60",
                        "--profile-seconds", "1"], capture_output=True, text=True, env=env,
                       cwd="/", timeout=600)
    print(p.stdout[-3000:])
    assert p.returncode == 0, f"demo --mode {mode} failed:\n{p.stderr[-3000:]}"
    want = {"cpu": "CPU mode", "replay": "replay mode"}[mode]
    assert want in p.stdout, f"the demo does not say it runs {want}"
    assert "[4/4]" in p.stdout and "FreeRide report" in p.stdout
    report = json.load(open(os.path.join(out, "report.json")))
    assert len(report["lanes"]) == 4, report["lanes"]
    assert report["bubble_fraction"] > 0.2, report["bubble_fraction"]
    assert report["total"]["harvested_ns"] > 0, "side tasks harvested nothing"
    assert report["overhead_pct"] is not None and report["cost_saving_pct"] is not None
    # Every task was valued; on a loaded machine a task whose measured steps fit
    # no bubble of its lane may do nothing, but the lanes as a whole must.
    assert len(report["tasks"]) == 4 and all(t["alone_rate_per_s"] > 0 for t in report["tasks"]), report["tasks"]
    assert sum(t["work_gpu_s"] for t in report["tasks"]) > 0, report["tasks"]
    svg = ET.parse(os.path.join(out, "timeline.svg")).getroot()
    assert svg.tag.endswith("svg")
    rects = [r for r in svg.iter() if r.tag.endswith("rect")]
    assert len(rects) > 20, f"the SVG draws only {len(rects)} rectangles"
    trace = json.load(open(os.path.join(out, "timeline.perfetto.json")))
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "side_task"]
    assert steps and all(e["ph"] == "X" and e["dur"] >= 0 for e in steps)
    # A second run may not overwrite the first run's folder.
    p = subprocess.run([freeride, "demo", "--out", out], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "not empty" in p.stderr, p.stderr
    print(f"demo --mode {mode}: ok, harvest {report['harvest_ratio']:.2f}, overhead "
          f"{report['overhead_pct']:+.1f}%")
