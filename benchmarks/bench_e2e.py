"""End-to-end throughput of `noveld run` (file → stdout), the way a user runs it.

    python benchmarks/bench_e2e.py [--data FILE] [--repeat 3] [--times 10] [--model hdp]
                                   [--likelihood hybrid --featurizer hybrid]
                                   [--emit-assignments [batch]] [--against DIR]

Runs the CLI (``python -m noveld``, the console script's entry point and its environment
defaults) as a subprocess with events to /dev/null and reports wall-clock docs/s (process
start-up and JIT cache load included, then excluded by subtracting an empty run), the CPU
seconds of the run and peak RSS: the best and the median of ``--repeat`` runs. With
``--against DIR`` (another checkout of noveld, e.g. ``git worktree add /tmp/base main``) the
runs alternate between this code and DIR's (ABAB), for a comparison on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ASSIGNMENT_FLAGS, add_assignment_option, add_data_option, machine


def timed_run(
    data: Path, extra: list[str], state: bool = False, code: Path | None = None
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `noveld run` (fresh state dir if ``state``; the
    noveld under ``code`` if given)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        if state:
            extra = [*extra, "--state-dir", f"{tmp}/state"]
        cmd = [
            sys.executable,
            "-m",
            "noveld",
            "run",
            "--input",
            str(data),
            "--quiet",
            "--dlq",
            f"{tmp}/dlq.jsonl",
            *extra,
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        dt = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return dt, cpu


def report(name: str, n: int, startup: float, runs: list[tuple[float, float]]) -> None:
    """The best and median run's wall-clock docs/s (with and without start-up) and CPU."""
    walls = [w for w, _ in runs]
    cpus = [c for _, c in runs]
    for what, wall in (("best", min(walls)), ("median", statistics.median(walls))):
        print(
            f"{name}{what} wall clock: {wall:.2f} s → {n / wall:,.0f} docs/s including "
            f"start-up, {n / max(wall - startup, 1e-9):,.0f} docs/s steady state"
        )
    print(f"{name}CPU seconds of a run (median): {statistics.median(cpus):.2f}")


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
    p.add_argument(
        "--likelihood", choices=["multinomial", "edcm", "vmf", "hybrid"], default="multinomial"
    )
    p.add_argument(
        "--featurizer",
        choices=["words", "semantic", "hybrid"],
        default="words",
        help="hybrid with --likelihood hybrid, semantic with --likelihood vmf",
    )
    p.add_argument(
        "--against",
        type=Path,
        help="another noveld checkout to compare with, run in alternation (ABAB)",
    )
    add_assignment_option(p)
    a = p.parse_args()
    model = ["--model", a.model, "--likelihood", a.likelihood, "--featurizer", a.featurizer]
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
    codes: list[Path | None] = [None] if a.against is None else [None, a.against]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as empty:
        startup = min(timed_run(Path(empty.name), model)[0] for _ in range(a.repeat))
    runs: dict[Path | None, list[tuple[float, float]]] = {c: [] for c in codes}
    for _ in range(a.repeat):
        for code in codes:  # in alternation: the machine's load falls on both alike
            runs[code].append(timed_run(a.data, model, a.state_dir, code))
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"machine: {machine()}")
    emitted = f", with {a.emit_assignments} assignment events" if a.emit_assignments else ""
    print(
        f"data: {a.data} ({n:,} docs), model {a.model} ({a.likelihood}, featurizer "
        f"{a.featurizer}){emitted}"
    )
    print(f"process start-up (empty input): {startup:.2f} s")
    for code in codes:
        name = "" if a.against is None else ("this code: " if code is None else f"{code}: ")
        report(name, n, startup, runs[code])
    print(f"peak RSS of a run: {rss:,.0f} MiB")


if __name__ == "__main__":
    main()
