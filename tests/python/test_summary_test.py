"""scripts/test_summary.py: the test command's count, and each test that did not run said with its reason."""
from __future__ import annotations

import subprocess
import sys

from conftest import SOURCE_DIR

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="3">
 <testcase name="Units.Pass" status="run"><system-out>ok</system-out></testcase>
 <testcase name="tasks_cuda_matches_cpu" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>
  <system-out>freeride-tasks-check: skipped: no usable GPU: no driver
</system-out></testcase>
 <testcase name="python_x" status="run"><system-out>...
========== 3 passed, 1 failed in 1.20s ==========
</system-out></testcase>
 <testcase name="Quiet.Disabled" status="disabled"></testcase>
</testsuite>
"""


def test_the_count_and_each_test_not_run_with_its_reason(tmp_path) -> None:
    xml = tmp_path / "ctest.xml"
    xml.write_text(JUNIT)
    out = subprocess.run([sys.executable, str(SOURCE_DIR / "scripts" / "test_summary.py"), str(xml)],
                         capture_output=True, text=True, check=True).stdout
    assert "tests: 4 passed, 1 failed, 2 skipped\n" in out
    assert "  not run: tasks_cuda_matches_cpu: freeride-tasks-check: skipped: no usable GPU: no driver\n" in out
    assert "  not run: Quiet.Disabled: no output (disabled)\n" in out
