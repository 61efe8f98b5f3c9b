"""End-to-end throughput of `noveld run` (file → stdout), the way a user runs it.

    python benchmarks/bench_e2e.py [--data FILE] [--repeat 3] [--times 10] [--model hdp]
                                   [--likelihood edcm|vmf|hybrid]
                                   [--featurizer words|semantic|hybrid]
                                   [--emit-assignments [batch]]
                                   [--ui on|watched] [--against DIR]

Runs the CLI (``python -m noveld``, with the console script's environment defaults) as a
subprocess with events to /dev/null and reports wall-clock docs/s (process start-up and JIT
cache load included, then excluded by subtracting an empty run), CPU seconds and peak RSS: the
best and the median of ``--repeat`` runs. ``--against DIR`` (another checkout of noveld) runs
DIR's code in alternation with this one (ABAB), for comparisons on a shared machine.
``--ui on`` serves the web view (``--ui-port 0``); ``--ui watched`` also asks its three APIs
every ``--ui-every`` seconds while the run lasts (3: as an open page does).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ASSIGNMENT_FLAGS, add_assignment_option, add_data_option, machine


def watch(proc: subprocess.Popen[str], done: threading.Event, every: float) -> None:
    """Ask the run's web view for what its page asks (stories, births, status) every ``every``
    seconds until ``done``."""
    assert proc.stderr is not None
    url = None
    for line in proc.stderr:
        found = re.search(r"web view on (http://\S+/)", line)
        if found:
            url = found.group(1)
            break
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # never let it fill up
    while url is not None and not done.wait(every):
        for api in ("stories?limit=25", "births?limit=100", "status"):
            try:
                urllib.request.urlopen(url + "api/" + api, timeout=5).read()
            except OSError:
                return  # the run ended


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed_run(
    data: Path,
    extra: list[str],
    state: bool = False,
    ui: str = "off",
    every: float = 3.0,
    code: Path | None = None,
) -> tuple[float, float, float]:
    """(seconds, peak RSS MiB, CPU seconds of the child) for one `noveld run` (fresh state dir
    if ``state``; the web view served, and asked every ``every`` s when ``ui`` is "watched"). CPU
    time counts every thread of the run (the view's included) and varies less than the wall
    clock on a machine shared with other work. ``code``: run the noveld checked out there."""
    env = dict(os.environ)
    root = Path(code).resolve() if code is not None else Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as tmp:
        if state:
            extra = [*extra, "--state-dir", f"{tmp}/state"]
        cmd = [
            sys.executable,
            "-m",
            "noveld",  # as the console script: its environment defaults (one BLAS thread)
            "run",
            "--input",
            str(Path(data).resolve()),
            "--quiet",
            "--dlq",
            f"{tmp}/dlq.jsonl",
            *extra,
        ]
        if ui != "off":
            cmd += ["--ui-port", "0"]
        done = threading.Event()
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        proc = subprocess.Popen(  # run from tmp: `-m` puts the working directory first
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp
        )
        watcher = None
        if ui == "watched":
            watcher = threading.Thread(target=watch, args=(proc, done, every), daemon=True)
            watcher.start()
        _, err = proc.communicate() if watcher is None else (None, "")
        if watcher is not None:
            proc.wait()
        dt = time.perf_counter() - t0
        done.set()
        if proc.returncode != 0:
            raise SystemExit(f"noveld run failed (exit {proc.returncode}): {err}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return dt, rss, _children_cpu() - cpu0


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
    add_assignment_option(p)
    p.add_argument(
        "--ui",
        choices=["off", "on", "watched"],
        default="off",
        help="serve the web view (on), and ask its APIs as its page does (watched)",
    )
    p.add_argument(
        "--ui-every",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="--ui watched: seconds between two rounds of questions (default 3, the page's)",
    )
    p.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="also run the noveld checked out in DIR, in alternation (ABAB), and report both",
    )
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
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as empty:
        empty_runs = [timed_run(Path(empty.name), model, ui=a.ui) for _ in range(a.repeat)]
    startup, startup_cpu = min(r[0] for r in empty_runs), min(r[2] for r in empty_runs)
    codes: list[Path | None] = [None] if a.against is None else [None, a.against]
    runs: dict[Path | None, list[tuple[float, float, float]]] = {c: [] for c in codes}
    for _ in range(a.repeat):
        for code in codes:  # in alternation: the machine's load falls on both alike
            runs[code].append(timed_run(a.data, model, a.state_dir, a.ui, a.ui_every, code))
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"machine: {machine()}")
    emitted = f", with {a.emit_assignments} assignment events" if a.emit_assignments else ""
    emitted += f", web view {a.ui}" if a.ui != "off" else ""
    emitted += f" every {a.ui_every:g} s" if a.ui == "watched" else ""
    what = f"model {a.model} ({a.likelihood}, featurizer {a.featurizer}){emitted}"
    print(f"data: {a.data} ({n:,} docs), {what}")
    print(f"process start-up (empty input): {startup:.2f} s")
    for code in codes:
        name = "" if a.against is None else ("this code: " if code is None else f"{code}: ")
        walls = [r[0] for r in runs[code]]
        for label, wall in (("best ", min(walls)), ("median ", statistics.median(walls))):
            print(
                f"{name}{label}wall clock: {wall:.2f} s → {n / wall:,.0f} docs/s including "
                f"start-up, {n / max(wall - startup, 1e-9):,.0f} docs/s steady state"
            )
        cpu = statistics.median(r[2] for r in runs[code])
        print(
            f"{name}CPU time (median): {cpu:.2f} s (start-up {startup_cpu:.2f} s) → "
            f"{n / max(cpu - startup_cpu, 1e-9):,.0f} docs per CPU-second steady state"
        )
    print(f"peak RSS of a run: {rss:,.0f} MiB")


if __name__ == "__main__":
    main()
