"""Prints the test command's count: each ctest test once, except that a
ctest test that runs a pytest file counts as the tests pytest ran in it.
Usage: test_summary.py CTEST_JUNIT_XML"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

PYTEST_LINE = re.compile(r"^=+ (.*) in [0-9.]+s.*=+$", re.M)
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def main(path: str) -> int:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    not_run = []  # (name, why): each said below the count, never a bare number
    for case in ET.parse(path).getroot().iter("testcase"):
        out = "".join(e.text or "" for e in case.iter("system-out"))
        lines = PYTEST_LINE.findall(out)
        if lines:
            found = {k: int(n) for n, k in COUNT.findall(lines[-1])}
            print(f"pytest {case.get('name')}: {lines[-1]}")
            counts["passed"] += found.get("passed", 0) + found.get("xpassed", 0)
            counts["failed"] += found.get("failed", 0) + found.get("error", 0) + found.get("errors", 0)
            counts["skipped"] += found.get("skipped", 0) + found.get("xfailed", 0)
            continue
        status = case.get("status", "")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            counts["skipped"] += 1
            said = [line for line in out.splitlines() if line.strip()]
            not_run.append((case.get("name"), said[-1] if said else f"no output ({status})"))
        elif case.find("failure") is not None or case.find("error") is not None or status == "fail":
            counts["failed"] += 1
        else:
            counts["passed"] += 1
    print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    for name, why in not_run:
        print(f"  not run: {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
