"""bench/gate_rows.py: rows of several gate_gpu.py runs valued at one rate alone per program."""
from __future__ import annotations

import json
import math
import subprocess
import sys

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from gate_rows import daemon_args, summary, valued_rows  # noqa: E402

SCRIPT = SOURCE_DIR / "bench" / "gate_rows.py"


def row(program: str, units: float, bubble_s: float, harvest: float) -> dict:
    return {"profile": "interleaved", "program": program, "units_on_by_lane": [units],
            "bubble_s_on_by_lane": [bubble_s], "harvest": harvest, "units_off_after_block_start": 0,
            "overhead_on_vs_no_side": {"pct": 0.2, "low": 0.1, "high": 0.3}}


def write(tmp_path, name: str, results: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(results))
    return str(path)


def test_every_row_is_valued_at_the_highest_reading_of_any_file(tmp_path) -> None:
    # Run a read `compiled` at 400 alone, run b at 300: b's 90 units in 0.3 s of bubbles are 0.75 at
    # the higher rate, not the 1.0 its own reading gave.
    a = write(tmp_path, "a.json", {"command": "bench/gate_gpu.py --profiles interleaved", "rows": [
        row("compiled+FREERIDE_GATE_AHEAD=1024", 100, 0.5, 0.5)],
        "alone_rates": {"compiled+FREERIDE_GATE_AHEAD=1024": 400.0}})
    b = write(tmp_path, "b.json", {"daemon_args": "--gate-margin-us 100", "rows": [row("compiled", 90, 0.3, 1.0)],
                                   "alone_rates": {"compiled": 300.0}, "alone_rates_after": {"compiled": 350.0}})
    rows, seen = valued_rows([a, b])
    assert seen == {"compiled": [400.0, 300.0, 350.0]}
    assert [r["alone_rate_used_per_s"] for r in rows] == [400.0, 400.0]
    assert math.isclose(rows[0]["harvest_at_highest"], 0.5) and math.isclose(rows[1]["harvest_at_highest"], 0.75)
    assert rows[1]["harvest"] == 1.0, "the row's own figure is kept beside it"
    assert [r["daemon_args"] for r in rows] == ["", "--gate-margin-us 100"]
    table = subprocess.run([sys.executable, str(SCRIPT), a, b], capture_output=True, text=True, check=True).stdout
    assert "compiled 400, 300, 350 → **400**" in table
    assert "| b.json | --gate-margin-us 100 | interleaved | compiled | 90 | 0.300 | 1.00 | **0.75** |" in table


def test_the_footnote_judges_the_rows_against_the_targets_by_the_worse_bound(tmp_path) -> None:
    """Two rows: one within every target by its plain interval but over the 0.5% bound by its
    drift-adjusted one, one over the 0.3% mean; harvest at the highest reading 0.5 and 0.8."""
    fine = dict(row("compiled", 200, 0.5, 0.5), overhead_on_vs_no_side={"pct": 0.1, "low": 0.0, "high": 0.2},
                overhead_on_vs_no_side_drift_adjusted={"pct": 0.2, "low": -0.1, "high": 0.6})
    slow = dict(row("resnet50", 40, 1.0, 0.8), overhead_on_vs_no_side={"pct": 0.4, "low": 0.35, "high": 0.45},
                units_off_after_block_start=2)
    path = write(tmp_path, "r.json", {"rows": [fine, slow], "alone_rates": {"compiled": 800.0, "resnet50": 50.0}})
    rows, _ = valued_rows([path])
    lines = summary(rows)
    assert lines[0] == ("On vs no side over 2 rows: mean +0.25%, highest +0.40% (r.json interleaved resnet50); "
                        "highest 95% upper bound +0.60% (r.json interleaved compiled; of each row the worse of "
                        "plain and drift-adjusted).")
    assert lines[1] == ("Over +0.3% mean or +0.5% upper bound: r.json interleaved compiled (+0.10%, upper +0.60%); "
                        "r.json interleaved resnet50 (+0.40%, upper +0.45%).")
    assert lines[2] == "Harvest at the highest reading ≥ 0.8: 1 of 2 rows."
    assert lines[3] == "Side units in marks-off iterations: 2 over 2 rows."
    table = subprocess.run([sys.executable, str(SCRIPT), path], capture_output=True, text=True, check=True).stdout
    assert table.rstrip().endswith(lines[-1])


def test_a_command_line_without_its_quotes_gives_the_daemon_args_up_to_the_benchs_next_option() -> None:
    command = ("bench/gate_gpu.py --profiles interleaved --daemon-args=--gate-margin-us 100 --gate-lead-us 0 "
               "--stage-copy-share 0.5 --measure-seconds 10")
    assert daemon_args({"command": command}) == "--gate-margin-us 100 --gate-lead-us 0"
    assert daemon_args({"command": "bench/gate_gpu.py --daemon-args --gpus 1 --keep-logs"}) == "--gpus 1"
    assert daemon_args({"command": "bench/gate_gpu.py --profiles zbv"}) == ""
    # A boolean option's negative form ends it too.
    assert daemon_args({"command": "bench/gate_gpu.py --daemon-args=--gpus 1 --no-alone-again"}) == "--gpus 1"


def test_a_file_that_is_not_a_result_file_is_refused_with_its_name(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\"rows\": 3}")
    r = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "bad.json: no \"rows\"" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert r.returncode != 0 and "missing.json" in r.stderr and "Traceback" not in r.stderr
    empty = write(tmp_path, "empty.json", {"rows": []})
    r = subprocess.run([sys.executable, str(SCRIPT), empty], capture_output=True, text=True)
    assert r.returncode != 0 and "no rows" in r.stderr


def test_a_program_counting_anothers_unit_is_valued_at_the_higher_rate_of_the_two(tmp_path) -> None:
    # pagerank-short counts PageRank iterations, as pagerank does, but its 0.5 ms steps read 800/s
    # alone against 1200/s: its 400 units in 0.5 s of bubbles are 400/600 = 0.67, not 1.0.
    path = write(tmp_path, "s.json", {"rows": [row("pagerank-short+FREERIDE_GATE_AHEAD=1024", 400, 0.5, 1.0),
                                                row("pagerank", 480, 0.5, 0.8)],
                                       "alone_rates": {"pagerank-short+FREERIDE_GATE_AHEAD=1024": 800.0,
                                                       "pagerank": 1200.0}})
    rows, seen = valued_rows([path])
    assert seen == {"pagerank": [800.0, 1200.0]}
    assert [r["alone_rate_used_per_s"] for r in rows] == [1200.0, 1200.0]
    assert math.isclose(rows[0]["harvest_at_highest"], 400 / 600) and math.isclose(rows[1]["harvest_at_highest"], 0.8)
