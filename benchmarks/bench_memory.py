"""Memory stays bounded on a long stream with forgetting on.

    python benchmarks/bench_memory.py [--docs 1000000] [--half-life 20000]
                                      [--featurizer hybrid --likelihood hybrid]

Generates a synthetic stream whose stories fade (``lifetime``), runs the real pipeline over it
in-process (events discarded) and prints RSS, active clusters and postings-pool size every 10 %.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the daemon's launcher asks, before numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine

from noveld.daemon.embedded import run_file
from noveld.daemon.settings import load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.synth import SynthConfig, write_jsonl


def rss_mib() -> float:
    """Resident set size of this process."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Sampler:
    """Batch observer printing a line every ``every`` documents."""

    def __init__(self, every: int, pipeline_ref: list) -> None:
        self.every = every
        self.seen = 0
        self.next = every
        self.t0 = time.perf_counter()
        self.ref = pipeline_ref

    def __call__(self, docs, positions, assignments) -> None:  # type: ignore[no-untyped-def]
        self.seen += len(docs)
        if self.seen >= self.next and self.ref:
            self.next += self.every
            stats = self.ref[0].state.stats
            print(
                f"{self.seen:>10,} docs  RSS {rss_mib():7.1f} MiB  active clusters "
                f"{int(stats.alive.sum()):6,}  slots {stats.kmax:6,}  postings "
                f"{int(stats.ictl[0]):9,}  vocab {len(self.ref[0].vocab):8,}  "
                f"{self.seen / (time.perf_counter() - self.t0):8,.0f} docs/s",
                flush=True,
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--half-life", type=float, default=20_000)
    p.add_argument("--stories", type=int, default=3000)
    p.add_argument(
        "--likelihood", choices=["multinomial", "edcm", "vmf", "hybrid"], default="multinomial"
    )
    p.add_argument("--featurizer", choices=["words", "semantic", "hybrid"], default="words")
    a = p.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.jsonl"
        cfg = SynthConfig(
            n_docs=a.docs,
            n_stories=a.stories,
            vocab_size=50_000,
            birth_rate=a.stories / a.docs * 1.5,
            lifetime=a.docs / a.stories * 20,
            seed=1,
        )
        write_jsonl(cfg, path)
        print(
            f"stream: {a.docs:,} docs, up to {a.stories:,} fading stories; "
            f"half-life {a.half_life:,.0f} docs; {a.likelihood} likelihood, {a.featurizer} "
            f"featurizer; RSS before run {rss_mib():.1f} MiB"
        )
        model = {
            "half_life_docs": a.half_life,
            "likelihood": a.likelihood,
            "featurizer": a.featurizer,
        }
        settings = load_settings(None, {"model": model, "dlq": str(Path(tmp) / "dlq.jsonl")})
        ref: list = []
        sampler = Sampler(a.docs // 10, ref)
        run_file(
            settings,
            str(path),
            events_sink=CollectingEvents(),
            observer=sampler,
            snapshot=False,
            on_start=ref.append,
        )


if __name__ == "__main__":
    main()
