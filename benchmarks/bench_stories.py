"""CPU cost of the story summaries (noveld stories) on the hot path of `noveld run`.

    python benchmarks/bench_stories.py [--data FILE] [--times 10] [--rounds 3]
                                       [--featurizer words|hybrid|semantic]
                                       [--likelihood multinomial|edcm|vmf|hybrid]

Runs `noveld run` in process over the data (file → /dev/null), alternately with
``stories.enabled`` false and true after one warm-up run, and reports the main thread's CPU
time of each run and the time spent in the story stage (building a batch's change) and in
folding it into the state. CPU time, not wall clock: on a shared machine the wall clock
varies by more than the cost measured.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, machine


def one_run(data: Path, enabled: bool, model: list[str]) -> tuple[float, float]:
    """(main-thread CPU seconds of the run, of which in the story stage and fold)."""
    from noveld.daemon import cli
    from noveld.daemon.stages import stories as stage
    from noveld.models import story_table

    spent = [0.0]

    def timed(owner: Any, name: str) -> Any:
        f = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                spent[0] += time.thread_time() - t

        setattr(owner, name, wrapper)
        return f

    change = timed(stage.StoryBuilder, "change")
    apply = timed(story_table.StoryTable, "apply")
    os.environ["NOVELD_STORIES__ENABLED"] = "true" if enabled else "false"
    try:
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            t = time.thread_time()
            cli.main(["run", "--input", str(data), "--quiet", "--dlq", f"{tmp}/dlq.jsonl", *model])
            total = time.thread_time() - t
    finally:
        stage.StoryBuilder.change = change
        story_table.StoryTable.apply = apply
        del os.environ["NOVELD_STORIES__ENABLED"]
    return total, spent[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    add_data_option(p)
    p.add_argument("--times", type=int, default=10, help="concatenate the data this many times")
    p.add_argument("--rounds", type=int, default=3, help="off/on pairs, in alternation")
    p.add_argument("--featurizer", help="as noveld run's (default: its default)")
    p.add_argument("--likelihood", help="as noveld run's (default: its default)")
    ns = p.parse_args()
    model = [
        *(["--featurizer", ns.featurizer] if ns.featurizer else []),
        *(["--likelihood", ns.likelihood] if ns.likelihood else []),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.jsonl"
        text = Path(ns.data).read_text()
        data.write_text(text * ns.times)
        n_docs = text.count("\n") * ns.times
        print(machine())
        print(f"data: {ns.data} ×{ns.times} ({n_docs:,} docs); model flags: {model or 'defaults'}")
        one_run(data, False, model)  # warm-up: loads the cached numba kernels once
        off, on, stage = [], [], []
        for _ in range(ns.rounds):
            off.append(one_run(data, False, model)[0])
            total, spent = one_run(data, True, model)
            on.append(total)
            stage.append(spent)
    a, b = statistics.median(off), statistics.median(on)
    s = statistics.median(stage)
    print(f"CPU off: median {a:.2f} s  ({', '.join(f'{x:.2f}' for x in off)})")
    print(f"CPU on:  median {b:.2f} s  ({', '.join(f'{x:.2f}' for x in on)})")
    print(
        f"story stage + fold: {s:.3f} s = {1e6 * s / n_docs:.2f} µs/doc; "
        f"on/off: +{100 * (b - a) / a:.1f} % CPU"
    )


if __name__ == "__main__":
    main()
