"""The benchmark scripts still run against the code they measure (not their numbers: those are
in docs/benchmarks.md). bench_compaction.py wraps a pipeline method, so a change of that
method's signature can break it silently."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_bench_compaction_runs_and_times_its_compactions() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_compaction.py"), "--docs", "20000",
         "--half-life", "200", "--compact-at", "100"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    found = re.search(r"compactions (\d+) \(longest", out.stdout)
    assert found and int(found.group(1)) >= 1, out.stdout
