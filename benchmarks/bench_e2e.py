"""End-to-end throughput of `noveld run` (file → stdout), the way a user runs it.

    python benchmarks/bench_e2e.py [--data FILE] [--repeat 3] [--times 10] [--model hdp]
                                   [--likelihood edcm] [--emit-assignments [batch]]

Runs the CLI as a subprocess with events to /dev/null and reports wall-clock docs/s (process
start-up and JIT cache load included, then excluded by subtracting an empty run) and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ASSIGNMENT_FLAGS, add_assignment_option, add_data_option, machine


def timed_run(data: Path, extra: list[str], state: bool = False) -> tuple[float, float]:
    """(seconds, peak RSS MiB of the child) for one `noveld run` (fresh state dir if ``state``)."""
    with tempfile.TemporaryDirectory() as tmp:
        if state:
            extra = [*extra, "--state-dir", f"{tmp}/state"]
        cmd = [
            sys.executable,
            "-m",
            "noveld.daemon.cli",
            "run",
            "--input",
            str(data),
            "--quiet",
            "--dlq",
            f"{tmp}/dlq.jsonl",
            *extra,
        ]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return dt, rss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--times",
        type=int,
        default=1,
        help="concatenate the data this many times (a longer steady-state run)",
    )
    p.add_argument(
        "--state-dir",
        action="store_true",
        help="also snapshot state (default interval) as a resumable run would",
    )
    p.add_argument("--model", choices=["dpmm", "svi", "hdp"], default="dpmm")
    p.add_argument("--likelihood", choices=["multinomial", "edcm"], default="multinomial")
    add_assignment_option(p)
    a = p.parse_args()
    model = ["--model", a.model, "--likelihood", a.likelihood]
    model += [ASSIGNMENT_FLAGS[a.emit_assignments]] if a.emit_assignments else []
    if a.times > 1:
        big = tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False)  # noqa: SIM115
        data = a.data.read_bytes()
        for _ in range(a.times):
            big.write(data)
        big.close()
        a.data = Path(big.name)
    with open(a.data, "rb") as fh:
        n = sum(1 for line in fh if line.strip())
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as empty:
        startup = min(timed_run(Path(empty.name), model)[0] for _ in range(a.repeat))
    best = min(timed_run(a.data, model, a.state_dir)[0] for _ in range(a.repeat))
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"machine: {machine()}")
    emitted = f", with {a.emit_assignments} assignment events" if a.emit_assignments else ""
    print(f"data: {a.data} ({n:,} docs), model {a.model} ({a.likelihood}){emitted}")
    print(f"process start-up (empty input): {startup:.2f} s")
    print(
        f"wall clock: {best:.2f} s → {n / best:,.0f} docs/s including start-up, "
        f"{n / max(best - startup, 1e-9):,.0f} docs/s steady state"
    )
    print(f"peak RSS of a run: {rss:,.0f} MiB")


if __name__ == "__main__":
    main()
